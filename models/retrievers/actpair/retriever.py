"""ActPair as a retriever of the trainer (:mod:`models.training.trainer`): the dual encoder over
a snapshot's frozen features, its training loss, and the builder the registry points to.

What reads what (DESIGN 4.4): the canonical action and scene vocabularies are built from the
queries' *texts* (:func:`models.retrievers.actpair.rewrite.text_action_tag` and the text's scene
word; Sec. 3.2 takes them from the captions), their raw tags canonicalised by the configured
language backend (Sec. 3.2 and 4.1: an LLM; the template backend's rules by default on a CPU), and inference (:meth:`ActPairRetriever.rewrite`
through a language backend, dual-view search) reads the query text and those vocabularies only.
Only the training loss reads the queries' verified predicates: the action label ``y_act`` of a
training pair is the tag of its first required event (:meth:`ActPairRetriever.action_labels`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from models.backends.encoders import ImageEncoderConfig, TextEncoderConfig
from models.backends.llm import BACKENDS as LLM_BACKENDS
from models.backends.llm import build_llm, resolve_llm_settings
from models.config import UNKNOWN_NAMED_KEYS, PlainConfig
from models.query_reading import read_query
from models.retrievers.actpair.model import ActPair, ActPairConfig, action_loss
from models.retrievers.actpair.pairwise_head import (
    PairwiseHead,
    PairwiseHeadConfig,
    preference_pairs,
    train_pairwise_head,
)
from models.retrievers.actpair.pipeline import DualViewResult, dual_view_retrieve
from models.retrievers.actpair.rewrite import RewriteReport, rewrite_queries, text_action_tag
from models.retrievers.actpair.vocabulary import (
    TagVocabulary,
    build_vocabulary,
    build_vocabulary_with_llm,
    first_event_tag,
)
from models.retrievers.features import FeatureConfig
from models.training.losses import siglip_loss

# -- the retriever of models.training.trainer -------------------------------------------------------------
# The embedded towers: sized for the frozen CPU features of the embedded encoders and a CPU.
EMBEDDED_TOWERS = {"d_embed": 256, "d_model": 256, "n_layers": 2, "n_heads": 4}


@dataclass
class ActPairRetrieverConfig(PlainConfig):
    """ActPair as a ``models.training.trainer`` retriever: frozen encoders, features, towers, vocabulary."""

    unknown_keys_message = UNKNOWN_NAMED_KEYS
    DEFAULTS_VERSION = 2                         # bump when a default here, in a nested config or in optimizer_defaults changes (runs record it)

    appearance: dict = field(default_factory=dict, metadata={"config": ImageEncoderConfig})  # ImageEncoderConfig of a_t (handcrafted by default)
    text: dict = field(default_factory=dict, metadata={"config": TextEncoderConfig})  # TextEncoderConfig of the text tokens (MiniLM)
    features: dict = field(default_factory=dict, metadata={"config": FeatureConfig})  # FeatureConfig (n_f^max = 32 observations per track)
    model: dict = field(default_factory=lambda: dict(EMBEDDED_TOWERS))  # ActPairConfig fields
    geometry: bool = True                            # append g_t to each observation token
    tag_top_k: int = 100                             # K most frequent raw action tags kept (Eq. 3)
    tag_threshold: float = 0.7                       # clustering threshold (canonicaliser "agglomerative")
    # what canonicalises the raw action and scene tags (Sec. 3.2, Eq. 4): {"backend": a language
    # backend of models.backends.llm ("template": rules, no model; "transformers", "openai": an
    # LLM), "settings": its settings}, or {"backend": "agglomerative"} (text-encoder clustering)
    canonicaliser: dict = field(default_factory=lambda: {"backend": "template"})
    # the canonical action vocabulary (TagVocabulary.to_dict()); None: built by the first prepare()
    # from that snapshot's query texts and then kept here, so a checkpoint reloads the same classes
    vocabulary: dict | None = None
    # the canonical scene vocabulary (of the query texts' scene words), built and kept likewise
    scene_vocabulary: dict | None = None
    pairwise: dict = field(default_factory=dict, metadata={"config": PairwiseHeadConfig})  # pairwise head (off)

    def __post_init__(self) -> None:
        derived = sorted({"d_visual", "d_text", "max_visual_tokens", "max_text_tokens"} & set(self.model))
        if derived:
            raise ValueError(f"ActPairRetrieverConfig.model: {derived} follow from the encoders; leave them out")
        if not isinstance(self.tag_top_k, int) or self.tag_top_k < 1:
            raise ValueError(f"tag_top_k must be a positive integer, got {self.tag_top_k!r}")
        self.canonicaliser = _canonicaliser(self.canonicaliser)


def _canonicaliser(spec) -> dict:
    """The canonicaliser setting with its backend's settings resolved; ``ValueError`` naming the
    known backends, or the bad setting."""
    known = (*LLM_BACKENDS, "agglomerative")
    if not isinstance(spec, dict) or spec.get("backend") not in known or set(spec) - {"backend", "settings"}:
        raise ValueError(f"canonicaliser must be {{'backend': one of {list(known)}, 'settings': {{...}}}}, "
                         f"got {spec!r}")
    if spec["backend"] == "agglomerative":
        if spec.get("settings"):
            raise ValueError("the agglomerative canonicaliser takes no settings (tag_threshold sets it)")
        return {"backend": "agglomerative"}
    return {"backend": spec["backend"], "settings": resolve_llm_settings(spec["backend"], spec.get("settings"))}


class ActPairRetriever(nn.Module):
    """ActPair behind the retriever interface of ``models.training.trainer``: the visual tower reads the
    observation tokens of frozen features, the text tower the frozen text encoder's token states;
    a training query's action label comes from its required events through the canonical
    vocabulary, which is built from the query texts."""

    kind = "actpair"

    def __init__(self, config: ActPairRetrieverConfig | dict | None = None):
        super().__init__()
        from models.backends.encoders import (
            ImageEncoderConfig,
            TextEncoderConfig,
            build_image_encoder,
            build_text_encoder,
        )
        from models.retrievers.features import GEOMETRY_DIM, FeatureConfig

        cfg = config if isinstance(config, ActPairRetrieverConfig) else ActPairRetrieverConfig.from_dict(config)
        self.config = cfg
        # the Fast observations' crops alone (no full-frame ROIs, no Slow frames: the model reads neither)
        self.feature_config = FeatureConfig.from_dict({"fast_input": "crops", **cfg.features})
        text_config = TextEncoderConfig.from_dict(cfg.text)
        # frozen encoders: plain attributes, never in the state dict
        self.appearance_encoder = build_image_encoder(ImageEncoderConfig.from_dict(cfg.appearance))
        self.text_encoder = build_text_encoder(text_config)
        d_visual = self.appearance_encoder.dim + (GEOMETRY_DIM if cfg.geometry else 0)
        max_text = int(getattr(self.text_encoder, "max_length", None) or text_config.max_length)
        self.model = ActPair(ActPairConfig.from_dict(
            {**cfg.model, "d_visual": d_visual, "d_text": self.text_encoder.token_dim,
             "max_visual_tokens": self.feature_config.n_fast_max, "max_text_tokens": max_text}))
        self.vocabulary = TagVocabulary.from_dict(cfg.vocabulary) if cfg.vocabulary else None
        self.scene_vocabulary = TagVocabulary.from_dict(cfg.scene_vocabulary) if cfg.scene_vocabulary else None
        if self.vocabulary is not None and len(self.vocabulary.canonical) > self.model.config.n_actions:
            raise ValueError(f"the vocabulary has {len(self.vocabulary.canonical)} actions, the head "
                             f"{self.model.config.n_actions}")
        self.pairwise_config = PairwiseHeadConfig.from_dict(cfg.pairwise)
        self.pairwise_head: PairwiseHead | None = None
        if self.pairwise_config.enabled:
            self.pairwise_head = PairwiseHead(self.model.config.d_embed, self.pairwise_config)
            self.register_buffer("pairwise_trained", torch.zeros((), dtype=torch.bool))

    def config_dict(self) -> dict:
        return self.config.to_dict()

    @property
    def device(self) -> torch.device:
        return self.model.bias.device

    def build_action_vocabulary(self, snapshot) -> TagVocabulary:
        """The canonical action vocabulary of ``snapshot``'s query texts (one raw tag per text
        that names an event, :func:`text_action_tag`), at most ``n_actions`` classes, canonicalised
        by the configured canonicaliser; kept on the model and in its config. It reads no
        predicate, so an untrained model prepared on an evaluation snapshot gets the same
        vocabulary whatever the snapshot's annotations say. A language model's unusable answer is
        :class:`models.facts.InvalidOutput` with its raw text."""
        tags = [t for t in (text_action_tag(q.text) for q in snapshot.queries) if t]
        if not tags:
            raise ValueError(f"no query text of snapshot {snapshot.split!r} names an event: no action tags")
        vocab = self.canonical_vocabulary(tags, kind="action", max_classes=self.model.config.n_actions)
        self.vocabulary = vocab
        self.config.vocabulary = vocab.to_dict()
        scenes = [s for s in (read_query(q.text).scene for q in snapshot.queries) if s]
        if scenes:
            self.scene_vocabulary = self.canonical_vocabulary(scenes, kind="scene")
            self.config.scene_vocabulary = self.scene_vocabulary.to_dict()
        return vocab

    def canonical_vocabulary(self, tags: Sequence[str], *, kind: str, max_classes: int | None = None) -> TagVocabulary:
        """Raw ``tags`` (occurrences) → their canonical vocabulary through the configured
        canonicaliser (Sec. 3.2), at most ``max_classes`` classes (16 for a language backend
        when not given)."""
        spec = self.config.canonicaliser
        if spec["backend"] == "agglomerative":
            return build_vocabulary(tags, self.text_encoder, kind=kind, top_k=self.config.tag_top_k,
                                    threshold=self.config.tag_threshold, max_clusters=max_classes)
        llm = build_llm(spec["backend"], spec["settings"])
        return build_vocabulary_with_llm(tags, llm, kind=kind, top_k=self.config.tag_top_k,
                                         n_categories=max_classes, embedder=self.text_encoder)

    def prepare(self, snapshot, records=None, *, cache_dir: str | None = None):
        from dataclasses import replace

        from models.retrievers.features import FeatureExtractor
        from models.retrievers.scout.data import prepare_observations

        if self.vocabulary is None and snapshot.queries:
            self.build_action_vocabulary(snapshot)
        fcfg = replace(self.feature_config, cache_dir=cache_dir or self.feature_config.cache_dir)
        extractor = FeatureExtractor(fcfg, self.appearance_encoder, text=self.text_encoder)
        return prepare_observations(extractor, snapshot, records, geometry=self.config.geometry)

    def encode_tracks(self, data, records) -> torch.Tensor:
        """``E_img`` ``[P, d_embed]`` of ``records`` (row order kept)."""
        from models.retrievers.scout.data import record_rows

        rows = record_rows(data, records)
        return self.model.encode_tracks(data.tokens[rows].to(self.device), data.mask[rows].to(self.device))

    def encode_queries(self, data, query_ids) -> torch.Tensor:
        """``E_txt`` ``[Q, d_embed]`` of the queries (row order kept)."""
        from models.retrievers.scout.data import query_rows

        rows = query_rows(data, query_ids)
        tokens = torch.from_numpy(data.text.tokens[rows]).to(self.device)       # [Q, L, D]
        mask = torch.from_numpy(data.text.mask[rows]).to(self.device)           # [Q, L]
        return self.model.encode_queries(tokens, mask)

    @torch.no_grad()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Any query texts (e.g. rewrites) through the frozen text encoder and the text tower."""
        enc = self.text_encoder.encode(list(texts))
        return self.model.encode_queries(torch.from_numpy(enc.tokens).to(self.device),
                                         torch.from_numpy(enc.mask).to(self.device))

    def score(self, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Cosine similarity ``[Q, P]`` (the retrieval score of Sec. 3.4)."""
        return q @ v.T

    def action_labels(self, data, query_ids) -> torch.Tensor:
        """Canonical action index of each training query ``[Q]`` (-1: no event, or outside the
        vocabulary), from its verified predicates: training supervision only, never read by
        inference (:meth:`text_action_labels` is the text-side reading)."""
        if self.vocabulary is None:
            raise ValueError("no action vocabulary: prepare() a snapshot with queries first")
        labels = []
        for q in query_ids:
            predicates = data.query_predicates[int(q)]
            tag = first_event_tag((p["name"], p["value"]) if isinstance(p, dict) else (p.name, p.value)
                                  for p in predicates)
            labels.append(self.vocabulary.index(tag) if tag else -1)
        return torch.tensor(labels, dtype=torch.long, device=self.device)

    def text_action_labels(self, texts: Sequence[str]) -> torch.Tensor:
        """Canonical action index of each query text ``[Q]`` (-1: the text names no event, or one
        outside the vocabulary): what evaluation may read about a query's action."""
        if self.vocabulary is None:
            raise ValueError("no action vocabulary: prepare() a snapshot with queries first")
        tags = [text_action_tag(t) for t in texts]
        return torch.tensor([self.vocabulary.index(t) if t else -1 for t in tags], dtype=torch.long,
                            device=self.device)

    def training_loss(self, data, batch, ctx) -> dict:
        """SigLIP over the batch's (query, clean target) pairs (``models.retrievers.scout.data.contrastive_pairs``
        leaves out false in-batch negatives) plus ``λ_action`` times the action term; with
        ``ctx.gather`` and several ranks SigLIP scores the pairs of all ranks together, otherwise
        each rank scores (and chooses) the pairs of its own groups only."""
        from models.retrievers.scout.data import contrastive_pairs, no_pair_loss

        qs, _ = batch.local_slices(ctx.rank, ctx.world_size)
        gather = ctx.world_size > 1 and ctx.gather
        keep = contrastive_pairs(batch, None if gather else qs)              # [B]
        local = [i for i in range(len(batch.query_ids))[qs] if keep[i]]
        rank, world = (ctx.rank, ctx.world_size) if gather else (0, 1)
        n_pairs = int(keep.sum())
        dropped = (len(batch.query_ids) if gather else len(range(len(batch.query_ids))[qs])) - n_pairs
        if not local:
            zero = no_pair_loss(self)
            if not gather:   # nothing to score here (no rank waits on this one's embeddings)
                return {"loss": zero, "pairs": 0, "dropped_pairs": dropped}
            # every local group conflicts with another rank's: no pair of this rank in the gathered batch
            d = self.model.config.d_embed
            empty = torch.zeros(0, d, device=self.device, requires_grad=True)
            sig = siglip_loss(empty, empty, self.model.t_prime.exp(), self.model.bias, rank=rank, world_size=world)
            return {"loss": sig + zero, "siglip": sig.detach(), "pairs": n_pairs, "dropped_pairs": dropped}
        qids = [batch.query_ids[i] for i in local]
        img = self.encode_tracks(data, [batch.records[batch.target_columns[i]] for i in local])  # [b, E]
        txt = self.encode_queries(data, qids)                                                # [b, E]
        sig = siglip_loss(img, txt, self.model.t_prime.exp(), self.model.bias, rank=rank, world_size=world)
        labels = self.action_labels(data, qids)                                              # [b]
        act = action_loss(self.model.action_logits(img), self.model.action_logits(txt), labels)
        loss = sig + self.model.config.lambda_action * act["action"]
        return {"loss": loss, "siglip": sig.detach(), "action": act["action"].detach(), "ce": act["ce"].detach(),
                "consistency": act["consistency"].detach(), "t": float(self.model.t_prime.detach().exp()),
                "b": float(self.model.bias.detach()), "pairs": n_pairs, "dropped_pairs": dropped,
                "labelled_pairs": int((labels >= 0).sum())}

    def optimizer_defaults(self, steps: int) -> dict:
        """Batching for ``models.training.trainer.train`` (a TrainConfig ``batching`` key wins): groups without
        noisy-GT variants, since only each group's clean target is read."""
        return {"batching": {"noisy_gt": False}}

    def no_weight_decay(self) -> set[str]:
        """The pairwise head stays as built during the contrastive steps (it gets no gradient there)
        until :meth:`after_training` trains it."""
        head = self.pairwise_head
        return {f"pairwise_head.{n}" for n, _ in head.named_parameters()} if head is not None else set()

    # -- the pairwise head: trained after the dual encoder (models.retrievers.actpair.pairwise_head) --
    def after_training(self, data, snapshot, ctx) -> dict:
        """The trainer's post-training stage: with ``pairwise.enabled``, the frozen dual encoder
        embeds every training query and stored trajectory, the verified positives of each query
        are paired with its hardest verified negatives, and the pairwise head and its pointwise
        twin are trained on them with the Bradley–Terry loss. Runs once: ``pairwise_trained`` is
        in the checkpoint."""
        if self.pairwise_head is None:
            return {"pairwise_head": "disabled"}
        if bool(self.pairwise_trained):
            return {"pairwise_head": "trained before this resume"}
        matrix, qids, tids = snapshot.matrix(include_pseudo=False)                     # [Q, T] verified labels
        records = [(t, 0) for t in tids]
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            queries = self.encode_queries(data, qids).float().cpu()                    # [Q, d]
            items = torch.cat([self.encode_tracks(data, records[s: s + 256]) for s in range(0, len(records), 256)])
        self.model.train(was_training)
        items = items.float().cpu()                                                     # [T, d]
        pairs = preference_pairs((queries @ items.T).numpy(), matrix, self.pairwise_config.n_negatives)
        seed = int(torch.randint(0, 2**31 - 1, (1,)))     # from the run's RNG stream (restored on resume)
        report = train_pairwise_head(self.pairwise_head, queries, items, pairs, self.pairwise_config, seed=seed)
        self.pairwise_trained.fill_(True)
        return {"pairwise_head": report}

    def trained_pairwise_head(self) -> PairwiseHead:
        """The pairwise head, once trained (``ValueError`` naming what is missing otherwise)."""
        if self.pairwise_head is None:
            raise ValueError("this ActPair model has no pairwise head (train it with model.pairwise.enabled)")
        if not bool(self.pairwise_trained):
            raise ValueError("this ActPair model's pairwise head was never trained")
        return self.pairwise_head

    # -- inference: rewrite and dual-view retrieval ------------------------------------------
    def rewrite_report(self, texts: Sequence[str], llm=None) -> RewriteReport:
        """The rewritten view of query texts (Sec. 3.4): each text through the language backend
        ``llm`` (``models.backends.llm``; default the template backend) with the names of the
        canonical action and scene vocabularies. Reads the texts and the vocabularies only, never
        a query's predicates (DESIGN 4.4)."""
        llm = build_llm("template", {}) if llm is None else llm
        return rewrite_queries(list(texts), llm,
                               action_tags=self.vocabulary.canonical if self.vocabulary is not None else [],
                               scene_tags=self.scene_vocabulary.canonical if self.scene_vocabulary is not None else [])

    def rewrite(self, texts: Sequence[str], llm=None) -> list[str]:
        """The rewrites of :meth:`rewrite_report` (the original text where a rewrite failed)."""
        return self.rewrite_report(texts, llm).texts

    @torch.no_grad()
    def dual_view_search(self, texts: Sequence[str], rewrites: Sequence[str], gallery: torch.Tensor,
                         top_k: int | None = None, top_m: int | None = None) -> DualViewResult:
        """Sec. 3.4 over a gallery of track embeddings ``[N, d_embed]``: both views scored with the
        text tower, the top-K of each united, the mean score, the top-M."""
        s_orig = self.score(self.encode_texts(texts), gallery.to(self.device))                # [Q, N]
        s_rew = self.score(self.encode_texts(rewrites), gallery.to(self.device))              # [Q, N]
        c = self.model.config
        return dual_view_retrieve(s_orig, s_rew, top_k or c.top_k, top_m or c.top_m)


def build_retriever(config: dict | None = None) -> ActPairRetriever:
    """The factory ``models.training.trainer.MODEL_KINDS["actpair"]`` points to."""
    return ActPairRetriever(config)
