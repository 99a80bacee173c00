"""SCOUT as a retriever of the trainer (:mod:`models.training.trainer`): the predictor over a
snapshot's frozen features, its training loss, and the builder the registry points to.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from models.backends.encoders import ImageEncoderConfig, TextEncoderConfig
from models.config import UNKNOWN_NAMED_KEYS, PlainConfig
from models.retrievers.features import FeatureConfig
from models.retrievers.scout.data import (
    ObservationData,
    contrastive_pairs,
    no_pair_loss,
    prepare_observations,
    query_rows,
    record_rows,
)
from models.retrievers.scout.itm import ScoutITM, ScoutITMConfig
from models.retrievers.scout.itm_training import ScoutITMTraining, train_itm, training_pairs
from models.retrievers.scout.model import ScoutConfig, ScoutPredictor
from models.training.losses import info_nce

# -- the retriever of models.training.trainer -------------------------------------------------------------
# The embedded predictor: sized for the frozen CPU features of the embedded encoders (handcrafted
# appearance, MiniLM) and a CPU. ScoutConfig() itself keeps the paper's 24 layers and K = 64.
EMBEDDED_PREDICTOR = {"d_model": 256, "n_layers": 4, "n_heads": 4, "ff_mult": 4, "n_prompts": 16}


@dataclass
class ScoutRetrieverConfig(PlainConfig):
    """SCOUT as a ``models.training.trainer`` retriever: frozen encoders, features and the predictor."""

    unknown_keys_message = UNKNOWN_NAMED_KEYS
    DEFAULTS_VERSION = 1                         # bump when a default here, in a nested config or in optimizer_defaults changes (runs record it)

    appearance: dict = field(default_factory=dict, metadata={"config": ImageEncoderConfig})  # ImageEncoderConfig of a_t (handcrafted by default)
    text: dict = field(default_factory=dict, metadata={"config": TextEncoderConfig})  # TextEncoderConfig: the frozen target space (MiniLM)
    features: dict = field(default_factory=dict, metadata={"config": FeatureConfig})  # FeatureConfig (n_f^max = 32 observations per track)
    predictor: dict = field(default_factory=lambda: dict(EMBEDDED_PREDICTOR))  # ScoutConfig fields
    geometry: bool = True                            # append g_t to each observation token
    itm: dict = field(default_factory=dict, metadata={"config": ScoutITMTraining})  # ScoutITM after the first stage (off)

    def __post_init__(self) -> None:
        derived = sorted({"d_in", "d_text", "max_tokens"} & set(self.predictor))
        if derived:
            raise ValueError(f"ScoutRetrieverConfig.predictor: {derived} follow from the encoders and features; "
                             "leave them out")


class ScoutRetriever(nn.Module):
    """SCOUT behind the retriever interface of ``models.training.trainer``: observation tokens of frozen
    features through the predictor; queries are the frozen text encoder's pooled vectors."""

    kind = "scout"

    def __init__(self, config: ScoutRetrieverConfig | dict | None = None):
        super().__init__()
        from models.backends.encoders import (
            ImageEncoderConfig,
            TextEncoderConfig,
            build_image_encoder,
            build_text_encoder,
        )
        from models.retrievers.features import GEOMETRY_DIM, FeatureConfig

        cfg = config if isinstance(config, ScoutRetrieverConfig) else ScoutRetrieverConfig.from_dict(config)
        self.config = cfg
        # the Fast observations' crops alone (no full-frame ROIs, no Slow frames: the model reads neither)
        self.feature_config = FeatureConfig.from_dict({"fast_input": "crops", **cfg.features})
        # frozen encoders: plain attributes, never in the state dict
        self.appearance_encoder = build_image_encoder(ImageEncoderConfig.from_dict(cfg.appearance))
        self.text_encoder = build_text_encoder(TextEncoderConfig.from_dict(cfg.text))
        d_in = self.appearance_encoder.dim + (GEOMETRY_DIM if cfg.geometry else 0)
        self.predictor = ScoutPredictor(ScoutConfig.from_dict(
            {**cfg.predictor, "d_in": d_in, "d_text": self.text_encoder.dim,
             "max_tokens": self.feature_config.n_fast_max}))
        # ScoutITM over the same frozen tokens: trained by after_training, kept in the checkpoint
        self.itm_training = ScoutITMTraining.from_dict(cfg.itm)
        self.itm: ScoutITM | None = None
        if self.itm_training.enabled:
            self.itm = ScoutITM(ScoutITMConfig.from_dict(
                {**self.itm_training.model, "d_visual": d_in, "d_text": self.text_encoder.token_dim,
                 "max_visual_tokens": self.feature_config.n_fast_max,
                 "max_text_tokens": TextEncoderConfig.from_dict(cfg.text).max_length}))
            self.register_buffer("itm_trained", torch.zeros((), dtype=torch.bool))

    def config_dict(self) -> dict:
        return self.config.to_dict()

    @property
    def device(self) -> torch.device:
        return self.predictor.prompts.device

    def prepare(self, snapshot, records=None, *, cache_dir: str | None = None) -> ObservationData:
        from dataclasses import replace

        from models.retrievers.features import FeatureExtractor

        fcfg = replace(self.feature_config, cache_dir=cache_dir or self.feature_config.cache_dir)
        extractor = FeatureExtractor(fcfg, self.appearance_encoder, text=self.text_encoder)
        return prepare_observations(extractor, snapshot, records, geometry=self.config.geometry)

    def encode_tracks(self, data: ObservationData, records) -> torch.Tensor:
        """Predicted caption embeddings ``[P, d_text]`` of ``records`` (row order kept)."""
        rows = record_rows(data, records)
        return self.predictor(data.tokens[rows].to(self.device), data.mask[rows].to(self.device))

    def encode_queries(self, data: ObservationData, query_ids) -> torch.Tensor:
        """The frozen text embeddings ``[Q, d_text]`` of the queries, unit rows."""
        pooled = torch.from_numpy(data.text.pooled[query_rows(data, query_ids)]).to(self.device)
        return self.predictor.encode_queries(pooled)

    @torch.no_grad()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Any query texts through the frozen text encoder, unit rows ``[Q, d_text]``."""
        pooled = torch.from_numpy(self.text_encoder.encode(list(texts)).pooled).to(self.device)
        return self.predictor.encode_queries(pooled)

    def score(self, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Cosine similarity ``[Q, P]`` (SCOUT ranks by it)."""
        return q @ v.T

    def training_loss(self, data: ObservationData, batch, ctx) -> dict:
        """Symmetric InfoNCE over (query, clean target) pairs of the batch (:func:`contrastive_pairs`
        leaves out groups that would be false in-batch negatives); with ``ctx.gather`` and several
        ranks the pairs of all ranks are scored together, otherwise each rank scores (and chooses)
        the pairs of its own groups only."""
        qs, _ = batch.local_slices(ctx.rank, ctx.world_size)
        gather = ctx.world_size > 1 and ctx.gather
        keep = contrastive_pairs(batch, None if gather else qs)              # [B]
        local = [i for i in range(len(batch.query_ids))[qs] if keep[i]]
        n_pairs = int(keep.sum())
        dropped = (len(batch.query_ids) if gather else len(range(len(batch.query_ids))[qs])) - n_pairs
        if not local and not gather:     # nothing to score here (no rank waits on this one's embeddings)
            return {"loss": no_pair_loss(self), "pairs": 0, "dropped_pairs": dropped}
        if local:
            pred = self.encode_tracks(data, [batch.records[batch.target_columns[i]] for i in local])  # [b, d]
            target = self.encode_queries(data, [batch.query_ids[i] for i in local])            # [b, d]
        else:       # every local group conflicts with another rank's: this rank adds no pair to the gathered batch
            d = self.predictor.config.d_text
            pred = torch.zeros(0, d, device=self.device, requires_grad=True)
            target = torch.zeros(0, d, device=self.device)
        rank, world = (ctx.rank, ctx.world_size) if gather else (0, 1)
        loss = info_nce(pred, target, self.predictor.config.tau, rank=rank, world_size=world)
        if not local:
            loss = loss + no_pair_loss(self)
        return {"loss": loss, "pairs": n_pairs, "dropped_pairs": dropped}

    def optimizer_defaults(self, steps: int) -> dict:
        """SCOUT's recipe for ``models.training.trainer.train`` (fields the TrainConfig sets win): AdamW with
        the predictor config's learning rate, betas and weight decay, a linear warm-up over the same
        share of the run as ``warmup_steps / total_steps`` (600 of 6000 in the paper), then a cosine
        decay to zero; the per-forward batch B (``batch_size``, 128) without gathered negatives;
        groups without noisy-GT variants (only each group's clean target is read, so the variants'
        features would be computed for nothing)."""
        c = self.predictor.config
        return {"lr": c.lr, "betas": c.betas, "weight_decay": c.weight_decay,
                "warmup_steps": round(steps * c.warmup_steps / c.total_steps), "min_lr_ratio": 0.0,
                "batch_size": c.batch_size, "gather_negatives": c.gather_negatives,
                "batching": {"noisy_gt": False}}

    def no_weight_decay(self) -> set[str]:
        """Token positions and prompt tokens are not decayed (as in :func:`make_optimizer`); nor the
        ScoutITM head during the contrastive steps (it gets no gradient there, at most zeros from
        other processes, so it stays as built until :meth:`after_training` trains it)."""
        itm = {f"itm.{n}" for n, _ in self.itm.named_parameters()} if self.itm is not None else set()
        return {"predictor.positions", "predictor.prompts", *itm}

    # -- ScoutITM: trained on negatives mined by the trained first stage ----------------------------
    @torch.no_grad()
    def first_stage_scores(self, data: ObservationData, query_ids, records, chunk: int = 256) -> torch.Tensor:
        """Cosine scores ``[Q, P]`` of the (frozen) first stage, eval mode, on the CPU."""
        was_training = self.predictor.training
        self.predictor.eval()
        q = self.encode_queries(data, query_ids)                                        # [Q, d]
        v = torch.cat([self.encode_tracks(data, records[s: s + chunk]) for s in range(0, len(records), chunk)])
        self.predictor.train(was_training)
        return self.score(q, v).float().cpu()                                           # [Q, P]

    def after_training(self, data: ObservationData, snapshot, ctx) -> dict:
        """The trainer's post-training stage: with ``itm.enabled``, draw identity-hard negatives (other
        trajectories of the query's video) and mine hard negatives with the trained first stage over
        the training snapshot (every query against every stored trajectory; the verified relations
        say which are mismatches), and train ScoutITM on them (:mod:`models.retrievers.scout.itm_training`).
        Runs once: ``itm_trained`` is in the checkpoint."""
        if self.itm is None:
            return {"itm": "disabled"}
        if bool(self.itm_trained):
            return {"itm": "trained before this resume"}
        matrix, qids, tids = snapshot.matrix(include_pseudo=False)                      # [Q, T] verified labels
        records = [(t, 0) for t in tids]
        scores = self.first_stage_scores(data, qids, records)                           # [Q, T]
        seed = int(torch.randint(0, 2**31 - 1, (1,)))     # from the run's RNG stream (restored on resume)
        query_video = torch.as_tensor([q.video_id for q in snapshot.queries], dtype=torch.long)     # [Q], qids order
        track_video = torch.as_tensor([t.video_id for t in snapshot.tracks], dtype=torch.long)      # [T], tids order
        pairs = training_pairs(scores, torch.from_numpy(matrix.astype(np.int64)), query_video, track_video,
                               self.itm_training, seed=seed)
        rows = record_rows(data, records)
        q_rows = query_rows(data, qids)
        report = train_itm(self.itm, data.tokens[rows], data.mask[rows], torch.from_numpy(data.text.tokens[q_rows]),
                           torch.from_numpy(data.text.mask[q_rows]), pairs, self.itm_training, seed=seed)
        self.itm_trained.fill_(True)
        return {"itm": report}

    @torch.no_grad()
    def itm_scores(self, data: ObservationData, query_ids: Sequence[int],
                   records: Sequence[Sequence[tuple[int, int]]]) -> torch.Tensor:
        """ScoutITM match probabilities ``[Q, M]``: ``query_ids [Q]`` and ``records [Q][M]``, each
        query's short list of records ``(track_id, variant)`` (e.g. the fused top-20), in that order.

        Leak-free: reads only the prepared frozen features (observation tokens, the query text's token
        states). The ITM signal of ``models.retrievers.rerank.rerank_blend``."""
        self._require_itm()
        query_ids = [int(q) for q in query_ids]
        q_rows = query_rows(data, query_ids)
        return self._itm_probabilities(data, torch.from_numpy(data.text.tokens[q_rows]),
                                       torch.from_numpy(data.text.mask[q_rows]), records)

    @torch.no_grad()
    def itm_text_scores(self, data: ObservationData, texts: Sequence[str],
                        records: Sequence[Sequence[tuple[int, int]]]) -> torch.Tensor:
        """:meth:`itm_scores` for any query texts (the frozen text encoder's token states of each):
        what a retrieval pipeline's ITM term calls at search and evaluation time."""
        self._require_itm()
        encoded = self.text_encoder.encode(list(texts))
        return self._itm_probabilities(data, torch.from_numpy(encoded.tokens), torch.from_numpy(encoded.mask), records)

    def _require_itm(self) -> None:
        if self.itm is None:
            raise ValueError("this SCOUT model has no ScoutITM head (train it with itm.enabled)")
        if not bool(self.itm_trained):
            raise ValueError("this SCOUT model's ScoutITM head was never trained")

    def _itm_probabilities(self, data: ObservationData, text_tokens: torch.Tensor, text_mask: torch.Tensor,
                           records: Sequence[Sequence[tuple[int, int]]]) -> torch.Tensor:
        n = text_tokens.shape[0]
        if len(records) != n or len({len(r) for r in records}) > 1:
            raise ValueError(f"records must be [Q][M]: one list per query ({n}), all of one length")
        m = len(records[0]) if records else 0
        if not n or not m:
            return torch.zeros(n, m)
        flat = [tuple(int(x) for x in r) for row in records for r in row]
        unique = sorted(set(flat))
        position = {r: i for i, r in enumerate(unique)}
        rows = record_rows(data, unique)
        shortlist = torch.as_tensor([position[r] for r in flat], dtype=torch.long).reshape(n, m)
        was_training = self.itm.training
        self.itm.eval()
        probs = self.itm.score_shortlist(data.tokens[rows].to(self.device), data.mask[rows].to(self.device),
                                         text_tokens.to(self.device), text_mask.to(self.device), shortlist)
        self.itm.train(was_training)
        return probs.float().cpu()                                                       # [Q, M]


def build_retriever(config: dict | None = None) -> ScoutRetriever:
    """The factory ``models.training.trainer.MODEL_KINDS["scout"]`` points to."""
    return ScoutRetriever(config)
