from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from common.errors import ApplicationError
from models.tracks_io import TracksFormatError, check_against_video, parse_tracks
from models.tracks_io.mot import declare_seqinfo, find_sequence
from trajectories.models import SplitGroup, TrackImport, Video
from trajectories.services.imports import track_import
from trajectories.services.ingestion import video_import
from trajectories.services.splits import split_group_set_split


class Command(BaseCommand):
    help = ("Import existing tracks or annotated tubes as an imported proposal run: a MOTChallenge folder "
            "(gt/gt.txt or tracker output, seqinfo.ini, img1/ or a video), a JSON tube file or a CSV file.")

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="a MOTChallenge folder or file, a .json tube file or a .csv file")
        parser.add_argument("--format", choices=["mot", "json", "csv"], help="default: from the path")
        parser.add_argument("--video", type=int, help="the video to import onto (a MOTChallenge folder with img1/ "
                                                      "or a video file can bring its own)")
        parser.add_argument("--source", required=True, help="where the tracks come from (data set, sequence, tool)")
        parser.add_argument("--split-group", help="split group of a video imported from the folder (default: source)")
        parser.add_argument("--split", choices=["train", "dev", "test"], help="assign the split group's split")
        parser.add_argument("--tubes", action="store_true", help="annotated tubes to match proposals against")
        parser.add_argument("--source-verified", metavar="REASON",
                            help="retain the tracks without usability/duplicate review, for this reason")
        parser.add_argument("--tracker-output", action="store_true", help="a MOT file that is not ground truth")
        parser.add_argument("--frame-base", type=int, default=0, choices=[0, 1], help="CSV frame numbering")
        parser.add_argument("--clip", action="store_true", help="clip boxes partly outside the frame")

    def handle(self, *args, path, format, video, source, split_group, split, tubes, source_verified, tracker_output,
               frame_base, clip, **options):
        fmt = format or ("json" if path.suffix.lower() == ".json" else "csv" if path.suffix.lower() == ".csv" else "mot")
        seqinfo_bytes = None
        try:
            if fmt == "mot":
                seq = find_sequence(path)
                tracks_path, gt = seq.tracks_path, seq.gt and not tracker_output
                folder = seq.tracks_path.parent.parent if seq.gt else seq.tracks_path.parent
                if (folder / "seqinfo.ini").is_file():
                    seqinfo_bytes = (folder / "seqinfo.ini").read_bytes()
                if video is None:
                    video = self._video_from_sequence(seq, source=source, split_group=split_group, clip=clip)
            else:
                tracks_path, gt = path, None
                if video is None:
                    raise CommandError("--video is required for JSON and CSV files")
            target = Video.objects.select_related("split_group").filter(pk=video).first()
            if target is None:
                raise CommandError(f"unknown video #{video}")
            if split:
                split_group_set_split(group=SplitGroup.objects.get(pk=target.split_group_id), split=split)
                target.refresh_from_db()
            result = track_import(
                video=target, data=tracks_path.read_bytes(), file_name=tracks_path.name, fmt=fmt, source=source,
                purpose=TrackImport.Purpose.TUBES if tubes else TrackImport.Purpose.PROPOSALS,
                review=TrackImport.Review.SOURCE_VERIFIED if source_verified else TrackImport.Review.REVIEWED,
                review_reason=source_verified or "", gt=gt, frame_base=frame_base, clip=clip, seqinfo=seqinfo_bytes)
        except TracksFormatError as exc:
            raise CommandError(str(exc)) from exc
        except ApplicationError as exc:
            problems = (exc.extra or {}).get("problems") or []
            for p in problems[1:]:
                self.stderr.write(f"  line {p['line']}: {p['message']}")
            raise CommandError(exc.message) from exc
        run = result.run
        record = run.track_import
        if not result.created:
            self.stdout.write(f"{tracks_path}: already imported onto video #{target.pk} as run #{run.pk}")
            return
        self.stdout.write(self.style.SUCCESS(
            f"imported {tracks_path} onto video #{target.pk} as run #{run.pk} "
            f"({'annotated tubes' if record.purpose == 'tubes' else record.review.replace('_', '-')}): "
            f"{run.trajectory_count} tracks, {record.counts.get('rows', 0)} boxes, sha256 {record.file_sha256[:12]}"
            + (f", {run.duplicate_count} duplicate candidates" if record.purpose == "proposals" else "")))

    def _video_from_sequence(self, seq, *, source: str, split_group: str | None, clip: bool) -> int:
        """Import the sequence's frames (img1/) or video, after checking that its tracks parse and
        fit the size seqinfo.ini declares, so a bad file imports nothing."""
        media = seq.frames_dir or seq.video_path
        if media is None:
            raise CommandError(f"{seq.tracks_path.parent}: no img1/ frames or video here; pass --video")
        if seq.frames_dir is not None and not seq.seqinfo:
            raise CommandError("a folder of frames needs seqinfo.ini (its frameRate); or pass --video")
        parsed = declare_seqinfo(parse_tracks("mot", seq.tracks_path.read_text(), gt=seq.gt), seq.seqinfo)
        if seq.seqinfo:
            info = seq.seqinfo
            check_against_video(parsed, width=info["imWidth"], height=info["imHeight"], frame_count=info["seqLength"],
                                clip=clip)
        fps = seq.seqinfo["frameRate"] if seq.seqinfo else None
        result = video_import(path=media, source=source, split_group=split_group,
                              name=(seq.seqinfo or {}).get("name") or None, fps=fps)
        self.stdout.write(f"{'imported' if result.created else 'found'} video #{result.video.pk} from {media}")
        return result.video.pk
