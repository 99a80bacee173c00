from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from common.errors import ApplicationError
from common.progress import ProgressBar
from models.tracks_io import FORMATS, TracksFormatError, check_against_video, parse_tracks
from models.tracks_io.mot import declare_seqinfo, find_sequence
from trajectories.models import Source, SplitGroup, TrackImport, Video
from trajectories.services.imports import imported_video_discard, track_import
from trajectories.services.ingestion import video_import
from trajectories.services.splits import split_group_set_split


def _format_of(path: Path) -> str:
    """The format a path's name and first bytes say: a ``.json`` file is a Label Studio export when
    it is a list of tasks or an object with ``annotations``, else a JSON tube file."""
    suffix = path.suffix.lower()
    if suffix == ".xml":
        return "cvat"
    if suffix == ".csv":
        return "csv"
    if suffix != ".json":
        return "mot"
    try:
        with path.open("rb") as f:
            head = f.read(65536).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    except OSError:
        return "json"
    if head.startswith("[") or ('"annotations"' in head and '"trajlab-tubes/' not in head):
        return "labelstudio"
    return "json"


class Command(BaseCommand):
    help = ("Import existing tracks or annotated tubes as an imported proposal run: a MOTChallenge folder "
            "(gt/gt.txt or tracker output, seqinfo.ini, img1/ or a video), a JSON tube file, a CSV file, a CVAT "
            "for video 1.1 XML file or a Label Studio video JSON export (keyframes interpolated as each tool does). "
            "The tracks are stored here, with a progress bar; a failure at any step leaves nothing behind "
            "(a video the folder brought included).")

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="a MOTChallenge folder or file, a .json tube file, a .csv file, "
                                                    "a CVAT .xml file or a Label Studio .json export")
        parser.add_argument("--format", choices=list(FORMATS),
                            help="default: from the path (.xml: cvat; .json: labelstudio for a Label Studio export, "
                                 "else json; .csv: csv; else mot)")
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
        parser.add_argument("--confirm-fit", action="store_true",
                            help="import although the file may belong to another video (boxes far past the frame, "
                                 "tracks that end early); without it such a file is refused with the findings")

    def handle(self, *args, path, format, video, source, split_group, split, tubes, source_verified, tracker_output,
               frame_base, clip, confirm_fit, **options):
        fmt = format or _format_of(path)
        seqinfo_bytes = None
        brought: list = []       # what this command created for a folder's own video, removed again on failure
        try:
            if fmt == "mot":
                seq = find_sequence(path)
                tracks_path, gt = seq.tracks_path, seq.gt and not tracker_output
                folder = seq.tracks_path.parent.parent if seq.gt else seq.tracks_path.parent
                if (folder / "seqinfo.ini").is_file():
                    seqinfo_bytes = (folder / "seqinfo.ini").read_bytes()
                if video is None:
                    video = self._video_from_sequence(seq, source=source, split_group=split_group, split=split,
                                                      clip=clip, brought=brought)
            else:
                tracks_path, gt = path, None
                if video is None:
                    raise CommandError(f"--video is required for {fmt} files")
            target = Video.objects.select_related("split_group").filter(pk=video).first()
            if target is None:
                raise CommandError(f"unknown video #{video}")
            if split:
                split_group_set_split(group=SplitGroup.objects.get(pk=target.split_group_id), split=split)
                target.refresh_from_db()
            with ProgressBar(f"{tracks_path.name} onto video #{target.pk}") as bar:
                result = track_import(
                    video=target, data=tracks_path.read_bytes(), file_name=tracks_path.name, fmt=fmt, source=source,
                    purpose=TrackImport.Purpose.TUBES if tubes else TrackImport.Purpose.PROPOSALS,
                    review=TrackImport.Review.SOURCE_VERIFIED if source_verified else TrackImport.Review.REVIEWED,
                    review_reason=source_verified or "", gt=gt, frame_base=frame_base, clip=clip,
                    seqinfo=seqinfo_bytes, confirm_fit=confirm_fit, echo=bar)
        except (TracksFormatError, ApplicationError, CommandError, OSError) as exc:
            imported_video_discard(brought=brought)
            if isinstance(exc, CommandError):
                raise
            if isinstance(exc, ApplicationError):
                for p in ((exc.extra or {}).get("problems") or [])[1:]:
                    self.stderr.write(f"  line {p['line']}: {p['message']}")
                for f in (exc.extra or {}).get("findings") or []:
                    self.stderr.write(f"  {f['code']}: {f['message']}")
                message = exc.message + (" (pass --confirm-fit to import it anyway)"
                                         if exc.code == "fit_unconfirmed" else "")
                raise CommandError(message) from exc
            raise CommandError(str(exc)) from exc
        except BaseException:
            imported_video_discard(brought=brought)
            raise
        run = result.run
        record = run.track_import
        if not result.created:
            self.stdout.write(f"{tracks_path}: already imported onto video #{target.pk} as run #{run.pk} ({run.status})")
            return
        self.stdout.write(self.style.SUCCESS(
            f"imported {tracks_path} onto video #{target.pk} as run #{run.pk} "
            f"({'annotated tubes' if record.purpose == 'tubes' else record.review.replace('_', '-')}): "
            f"{run.trajectory_count} tracks, {record.counts.get('rows', 0)} boxes, sha256 {record.file_sha256[:12]}"
            + (f", {run.duplicate_count} duplicate candidates" if record.purpose == "proposals" else "")))

    def _video_from_sequence(self, seq, *, source: str, split_group: str | None, split: str | None, clip: bool,
                             brought: list) -> int:
        """Import the sequence's frames (img1/) or video, after checking that its tracks parse and
        fit the size seqinfo.ini declares, and that the video would have a split, so a bad file
        imports nothing. What the import creates is listed in ``brought``."""
        media = seq.frames_dir or seq.video_path
        if media is None:
            raise CommandError(f"{seq.tracks_path.parent}: no img1/ frames or video here; pass --video")
        if seq.frames_dir is not None and not seq.seqinfo:
            raise CommandError("a folder of frames needs seqinfo.ini (its frameRate); or pass --video")
        parsed = declare_seqinfo(parse_tracks("mot", seq.tracks_path.read_text(encoding="utf-8"), gt=seq.gt),
                                 seq.seqinfo)
        if seq.seqinfo:
            info = seq.seqinfo
            check_against_video(parsed, width=info["imWidth"], height=info["imHeight"], frame_count=info["seqLength"],
                                clip=clip)
        group_name = split_group or source
        group = SplitGroup.objects.filter(name=group_name.strip()).first()
        if not split and (group is None or not group.split):
            raise CommandError(f"the video would join split group {group_name!r}, which has no split yet: pass "
                               "--split train|dev|test (a video's split locks with its first run)")
        had_source = Source.objects.filter(name=source.strip()).exists()
        fps = seq.seqinfo["frameRate"] if seq.seqinfo else None
        result = video_import(path=media, source=source, split_group=split_group,
                              name=(seq.seqinfo or {}).get("name") or None, fps=fps)
        if result.created:
            brought.append(result.video)
            if group is None:
                brought.append(result.video.split_group)
            if not had_source:
                brought.append(result.video.source)
        self.stdout.write(f"{'imported' if result.created else 'found'} video #{result.video.pk} from {media}")
        return result.video.pk
