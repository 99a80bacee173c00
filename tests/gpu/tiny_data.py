"""A tiny relation snapshot and a tiny text encoder for the GPU smoke, built with no Django, no
database and nothing downloaded.

``tiny_snapshot(folder)`` renders one short scene (``models.world.renderer.render_scene``: three
people, 40 frames at 320x240) into ``folder`` and turns its render truth into a
``RelationSnapshotData``: one track per person (its truth boxes on the frames it is in the
frame), two queries per person naming its clothing and its walk (with the matching predicates),
and verified relations (1 for the person a query describes, 0 for every other person; the
clothing colours differ, so the zeros are true). ``save_snapshot(snapshot, folder)`` writes it
the way the platform does (``RelationSnapshotData.save``) and returns the sealed hash.

``tiny_text_encoder(folder, texts)`` writes a random-weight sentence-transformers folder (a
one-layer BERT of width 32 with a word-piece vocabulary of the words in ``texts``, mean pooling,
normalisation): the ``text`` setting ``{"kind": "sentence-transformers", "path": ...}`` of every
retriever then loads it through the real loader. The packaged MiniLM would do as well, but it is
not on a GPU machine's own image (and is too large to carry there); random text features are
enough to take training steps.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from models.training.snapshot import (
    Relation,
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)
from models.vocabulary import DIRECTION_PHRASES
from models.world.renderer import render_scene
from models.world.scene import PersonSpec, SceneSpec

WIDTH, HEIGHT, N_FRAMES, FPS = 320, 240, 40, 10.0
# (upper, lower, direction, foot point at frame 0 as fractions of the frame): all colours distinct
PEOPLE = (("red", "blue", "right", (0.05, 0.80)), ("green", "black", "left", (0.95, 0.90)),
          ("yellow", "white", "towards", (0.50, 0.62)))
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def tiny_scene() -> SceneSpec:
    """The scene of :func:`tiny_snapshot` (people sized by the ground-plane perspective)."""
    spec = SceneSpec(name="gpu_smoke", width=WIDTH, height=HEIGHT, fps=FPS, n_frames=N_FRAMES, seed=7)
    for upper, lower, direction, (fx, fy) in PEOPLE:
        spec.people.append(PersonSpec(upper, lower, direction, start=(fx * WIDTH, fy * HEIGHT),
                                      height=float(spec.figure_height(fy * HEIGHT))))
    return spec


def tiny_snapshot(folder: str | Path, split: str = "train") -> RelationSnapshotData:
    """Render :func:`tiny_scene` into ``folder`` and build its snapshot (the module docstring)."""
    folder = Path(folder)
    spec = tiny_scene()
    path = folder / f"{spec.name}.mp4"
    truth = render_scene(spec, path)
    video = SnapshotVideo(1, str(path.resolve()), WIDTH, HEIGHT, FPS, N_FRAMES)
    tracks, queries, relations = [], [], []
    for i, person in enumerate(truth.people):
        frames = person.frames()                                                    # [n]
        if frames.size == 0:
            raise ValueError(f"person {i} of the tiny scene never enters the frame")
        tracks.append(SnapshotTrack(10 + i, video.id, frames, person.boxes_array()[frames]))  # [n], [n, 4]
    for i, (upper, lower, direction, _) in enumerate(PEOPLE):
        clothes = [{"name": "upper_colour", "value": upper, "fact_ids": []},
                   {"name": "lower_colour", "value": lower, "fact_ids": []}]
        walks = {"name": "walks", "value": direction, "fact_ids": []}
        texts = ((f"someone in a {upper} top and {lower} trousers", clothes),
                 (f"the one in {upper} walking {DIRECTION_PHRASES[direction]}", [clothes[0], walks]))
        for k, (text, predicates) in enumerate(texts):
            q = SnapshotQuery(100 + 10 * i + k, video.id, text, predicates=predicates, target_id=10 + i)
            queries.append(q)
            relations += [Relation(q.id, t.id, int(t.id == q.target_id), source="ground_truth") for t in tracks]
    snapshot = RelationSnapshotData(split, [video], tracks, queries, relations, meta={"built_by": "tests.gpu"})
    snapshot.validate()
    return snapshot


def save_snapshot(snapshot: RelationSnapshotData, folder: str | Path) -> str:
    """Write ``snapshot`` to ``folder`` and check it loads back under the same hash; returns it."""
    sha = snapshot.save(folder)
    if RelationSnapshotData.load(folder).content_sha256() != sha:
        raise ValueError(f"the snapshot saved in {folder} does not load back under its hash")
    return sha


def tiny_text_encoder(folder: str | Path, texts: list[str], *, width: int = 32, seed: int = 0) -> Path:
    """A random-weight sentence-transformers folder for ``texts`` (the module docstring)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    words = sorted({w for t in texts for w in re.findall(r"[a-z]+", t.lower())} - set(SPECIAL_TOKENS))
    (folder / "vocab.txt").write_text("\n".join([*SPECIAL_TOKENS, *words]) + "\n")
    BertTokenizer(vocab_file=str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(SPECIAL_TOKENS) + len(words), hidden_size=width, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=2 * width, max_position_embeddings=64)
    BertModel(config).save_pretrained(folder)
    # the on-disk layout of a sentence-transformers model (the packaged MiniLM's): transformer,
    # mean pooling, normalisation
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32, "do_lower_case": False}))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": width, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
         "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}))
    (folder / "2_Normalize").mkdir(exist_ok=True)
    return folder

