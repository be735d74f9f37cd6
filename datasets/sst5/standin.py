"""A seeded synthetic stand-in for SST-5, written as ``stsa.fine.{train,dev,test}`` files in the exact stsa format,
so that the fine-tuner checks run in a fresh clone without ``../shared`` (docs/finetuner.md, 'Reference behaviour', item 1 describes the
real files; shared/data/sst5/README.md their statistics).

What it imitates:

- the file format read by :func:`datasets.sst5.read_stsa`: UTF-8, one ``<label> <sentence>`` per line, ``\\n``
  line ends, labels 0..4; sentences lower-cased and PTB-tokenised (``it 's``, ``does n't``, ``wo n't``, commas and
  full stops as separate tokens, brackets as ``-lrb-``/``-rrb-``, hyphenated words, a few accented names);
- the class proportions of each real split (``STANDIN_CLASS_COUNTS``: the real counts divided by
  ``STANDIN_SCALE`` = 5, rounded: 1709/221/443 sentences), so the binary view (neutral dropped) keeps about 80%
  of each split as on the real data (1384/175/365); labels are spread evenly through each file, so the leading
  sentences that the fast checks slice (64 train, 32 dev, 32 test) have about the split's proportions too;
- the sentence-length spread (words per sentence: gamma-distributed, median about 18, 5th/95th percentile about
  6/35, a few sentences over 45 words, minimum 2), so that slices joining four sentences are longer than any
  usual max length and truncation / padding checks bite;
- a learnable sentiment signal: every sentence carries about one sentiment word per ten words, drawn mostly from
  its class's word list and otherwise from the neighbouring classes (graded, like SST's fine labels), among
  neutral filler (movie-review nouns, verbs and function words, and made-up proper names with a Zipf-like long
  tail, so that sentences are about as distinctive as real ones); a bag-of-words logistic regression reaches
  about 0.50 accuracy on the 5-class test split (majority rate 0.29; about 0.40 on the real SST-5) and about 0.86
  on the binary view;
- a couple of duplicate sentences inside the train split (the real train split has ten), none in dev or test and
  none shared between splits.

What it does not imitate: real sentence structure, negation or sarcasm (the label never depends on word order),
the real vocabulary (about 1,100 distinct tokens in the stand-in's train split, about 16,600 in the real one),
the real split sizes (8544/1101/2210, binary 6920/872/1821: checks that assert them must skip on the stand-in),
and accuracy levels of real models.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gru4rec_conformance.fileio import atomic_write_bytes

from .views import EXPECTED_CLASS_COUNTS, SPLITS

#: Version of the generator; part of the cache folder's name, bumped whenever the output changes.
STANDIN_VERSION = 1

#: The stand-in is about 1/STANDIN_SCALE of the real SST-5 splits.
STANDIN_SCALE = 5

#: Class counts (labels 0..4) of the stand-in's splits: the real counts / STANDIN_SCALE, rounded.
STANDIN_CLASS_COUNTS = {s: [int(round(c / STANDIN_SCALE)) for c in EXPECTED_CLASS_COUNTS[s]] for s in SPLITS}

#: Name under which reports record the stand-in (the real data are recorded as ``sst5``).
STANDIN_NAME = "sst5_standin"

#: Number of duplicated sentences put into the train split (a second copy, same label, elsewhere in the file).
_TRAIN_DUPLICATES = 2

# Sentiment words per class (0 very negative .. 4 very positive).
_SENTIMENT = (
    (
        "dreadful",
        "awful",
        "unwatchable",
        "abysmal",
        "atrocious",
        "worst",
        "insufferable",
        "excruciating",
        "disastrous",
        "lifeless",
        "idiotic",
        "appalling",
        "dismal",
        "wretched",
        "horrendous",
        "unbearable",
        "incompetent",
        "laughable",
        "garbage",
        "torture",
        "pathetic",
        "execrable",
        "unforgivable",
        "sickening",
    ),
    (
        "dull",
        "tedious",
        "bland",
        "mediocre",
        "clumsy",
        "forgettable",
        "uneven",
        "tired",
        "predictable",
        "sluggish",
        "shallow",
        "contrived",
        "flat",
        "muddled",
        "overlong",
        "stale",
        "plodding",
        "unconvincing",
        "thin",
        "awkward",
        "derivative",
        "disappointing",
        "tiresome",
        "lackluster",
    ),
    (
        "modest",
        "ordinary",
        "familiar",
        "routine",
        "conventional",
        "straightforward",
        "mixed",
        "middling",
        "serviceable",
        "passable",
        "unremarkable",
        "standard",
        "reasonable",
        "occasional",
        "competent",
        "typical",
        "moderate",
        "plain",
        "average",
        "fair",
        "so-so",
        "adequate",
        "uneventful",
        "measured",
    ),
    (
        "charming",
        "enjoyable",
        "solid",
        "engaging",
        "pleasant",
        "clever",
        "likable",
        "warm",
        "entertaining",
        "funny",
        "appealing",
        "sweet",
        "smart",
        "lively",
        "touching",
        "good",
        "amusing",
        "heartfelt",
        "fresh",
        "witty",
        "well-made",
        "satisfying",
        "sincere",
        "endearing",
    ),
    (
        "masterpiece",
        "brilliant",
        "stunning",
        "extraordinary",
        "wonderful",
        "superb",
        "exhilarating",
        "triumph",
        "magnificent",
        "dazzling",
        "breathtaking",
        "masterful",
        "glorious",
        "flawless",
        "astonishing",
        "unforgettable",
        "remarkable",
        "beautiful",
        "riveting",
        "powerful",
        "transcendent",
        "exquisite",
        "best",
        "mesmerizing",
    ),
)

# Probability of drawing a sentiment word from the class at distance d (0, 1, 2+) from the sentence's label.
_MIX = (0.70, 0.24, 0.06)

_DETS = ("the", "a", "this", "its", "that", "an", "every", "one")
_NOUNS = (
    "film",
    "movie",
    "story",
    "script",
    "director",
    "cast",
    "plot",
    "performances",
    "screenplay",
    "comedy",
    "drama",
    "characters",
    "dialogue",
    "ending",
    "audience",
    "actors",
    "scenes",
    "thriller",
    "romance",
    "picture",
    "filmmaker",
    "premise",
    "soundtrack",
    "camera",
    "tale",
    "documentary",
    "sequel",
    "humor",
    "narrative",
    "material",
    "effects",
    "production",
    "lead",
    "villain",
    "heroine",
    "family",
    "city",
    "war",
    "world",
    "life",
    "love",
    "time",
    "year",
    "moments",
    "minutes",
    "hour",
    "genre",
    "idea",
)
_VERBS = (
    "is",
    "was",
    "feels",
    "seems",
    "becomes",
    "remains",
    "makes",
    "offers",
    "gives",
    "turns",
    "proves",
    "plays",
    "tries",
    "wants",
    "takes",
    "looks",
    "sounds",
    "comes",
    "keeps",
    "ends",
    "shows",
    "tells",
)
_FUNCTION = (
    "of",
    "and",
    "to",
    "in",
    "that",
    "with",
    "as",
    "for",
    "but",
    "on",
    "by",
    "from",
    "about",
    "at",
    "into",
    "than",
    "so",
    "too",
    "more",
    "most",
    "all",
    "just",
    "even",
    "still",
    "never",
    "often",
    "there",
    "who",
    "which",
    "what",
    "when",
    "while",
    "if",
    "or",
    "not",
    "much",
    "very",
    "really",
    "rather",
    "enough",
    "almost",
    "quite",
    "its",
    "their",
    "his",
    "her",
    "it",
    "they",
    "we",
    "you",
)
_CHUNKS = (
    "it 's",
    "does n't",
    "wo n't",
    "is n't",
    "ca n't",
    "the film 's",
    "there 's",
    "you 're",
    "did n't",
    "-lrb- and -rrb-",
    "-lrb- sort of -rrb-",
    "new york",
    "los angeles",
    "20th century",
    "1930s",
    "two hours",
    "first half",
    "de niro",
    "jackie chan",
    "hollywood",
    "french",
    "british",
    "teen",
    "old-fashioned",
    "made-for-tv",
    "feel-good",
    "self-conscious",
    "coming-of-age",
    "director 's cut",
    "...",
    "--",
    ";",
    ":",
    "`` and ''",
)
# Accented names: rare, as in the real files (about 1% of the lines hold a non-ASCII character).
_ACCENTED = ("amélie", "café", "pokémon", "almodóvar", "josé", "señor", "zoë", "benigni 's pinocchio à la")
# Syllables of made-up proper names (characters, actors, places, titles): a long tail of rare words, as reviews
# have; they make sentences as distinctive as real ones (a tiny model memorises a few dozen of them quickly).
_SYLLABLES = (
    "ba",
    "ko",
    "mi",
    "ran",
    "del",
    "su",
    "tor",
    "vi",
    "len",
    "ga",
    "mo",
    "ris",
    "ta",
    "ne",
    "lu",
    "bar",
    "ker",
    "sa",
    "do",
    "fin",
    "ca",
    "lo",
    "wen",
    "ti",
    "ma",
    "ro",
    "zel",
    "pe",
    "hu",
    "nor",
)
_N_NAMES = 3000
_LEADING_PUNCT = {",", ";", ":", "--", "...", "``", "''"}
_INTENS = ("very", "truly", "utterly", "rather", "fairly", "quite", "so", "remarkably", "oddly", "simply")


def _pick(rng: np.random.Generator, seq: tuple[str, ...]) -> str:
    return seq[int(rng.integers(len(seq)))]


def _make_names() -> tuple[tuple[str, ...], np.ndarray]:
    """``_N_NAMES`` made-up names (1-2 words of 2-3 syllables) and the cumulative Zipf-like weights (k + 10)^-1
    they are drawn with (a few frequent, most rare); fixed, independent of the seed."""
    rng = np.random.default_rng(20130101)

    def word() -> str:
        return "".join(_SYLLABLES[int(i)] for i in rng.integers(len(_SYLLABLES), size=int(rng.integers(2, 4))))

    names = tuple(dict.fromkeys(f"{word()} {word()}" if rng.random() < 0.35 else word() for _ in range(_N_NAMES)))
    w = (np.arange(len(names)) + 10.0) ** -1.0
    return names, np.cumsum(w / w.sum())


_NAMES, _NAMES_CDF = _make_names()


def _name(rng: np.random.Generator) -> list[str]:
    """A made-up name of 1-2 words drawn from ``_NAMES``."""
    return _NAMES[min(int(np.searchsorted(_NAMES_CDF, rng.random())), len(_NAMES) - 1)].split()


def _class_probs(label: int) -> np.ndarray:
    d = np.abs(np.arange(5) - label)
    p = np.array([_MIX[min(int(x), 2)] for x in d], dtype=float)
    return p / p.sum()


def _filler(rng: np.random.Generator) -> list[str]:
    """One short neutral phrase (1-5 tokens)."""
    r = rng.random()
    if r < 0.001:
        return _pick(rng, _ACCENTED).split()
    if r < 0.08:
        return _name(rng)
    if r < 0.30:
        return [_pick(rng, _DETS), _pick(rng, _NOUNS)]
    if r < 0.50:
        return [_pick(rng, _FUNCTION), _pick(rng, _DETS), _pick(rng, _NOUNS)]
    if r < 0.68:
        return [_pick(rng, _VERBS)]
    if r < 0.88:
        return [_pick(rng, _FUNCTION)]
    return _pick(rng, _CHUNKS).split()


def _sentence(rng: np.random.Generator, label: int, n_words: int) -> str:
    """A lower-cased, PTB-tokenised sentence of about ``n_words`` tokens plus (mostly) final punctuation."""
    n_senti = max(1, int(round(n_words / 10.0 + rng.normal(0.0, 0.4))))
    probs = _class_probs(label)
    sentiment = []
    for _ in range(n_senti):
        word = _pick(rng, _SENTIMENT[int(rng.choice(5, p=probs))])
        if rng.random() < 0.15:
            word = f"{_pick(rng, _INTENS)} {word}"
        sentiment.append(word.split())
    budget = n_words - sum(len(s) for s in sentiment)
    phrases: list[list[str]] = []
    used = 0
    while used < budget:
        ph = _filler(rng)
        if len(ph) > budget - used:  # never cut a phrase (``ca n't`` stays whole)
            ph = [_pick(rng, _FUNCTION)]
        phrases.append(ph)
        used += len(ph)
    for s in sentiment:  # sentiment words between phrases, never inside one (``does n't`` stays whole)
        phrases.insert(int(rng.integers(0, len(phrases) + 1)), s)
    body: list[str] = []
    for i, ph in enumerate(phrases):
        if 0 < i < len(phrases) and rng.random() < 0.10:
            body.append(",")
        body.extend(ph)
    while body and body[0] in _LEADING_PUNCT:
        body.pop(0)
    end = rng.random()
    if end < 0.86:
        body.append(".")
    elif end < 0.90:
        body.append("!")
    elif end < 0.93:
        body.append("?")
    return " ".join(body)


def _lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """Words per sentence before commas and the final punctuation: gamma(4.5, 3.9) rounded, clipped to 1..52
    (with those, tokens per line come close to the real 5/25/50/75/95th percentiles 6/12/18/25/35, max 56)."""
    return np.clip(np.round(rng.gamma(4.5, 3.9, size=n)), 1, 52).astype(int)


def _interleaved_labels(rng: np.random.Generator, counts: list[int]) -> np.ndarray:
    """Labels with ``counts[c]`` copies of class c, spread evenly through the file in random local order: the
    k-th example of class c sits at key (k + U(0, 1)) / counts[c]. Every stretch of the file, the leading
    sentences that the fast checks use in particular, then has about the split's class proportions (a plain
    shuffle of 64 sentences can leave the train head's majority class a minority of the dev head)."""
    keys = np.concatenate([(np.arange(n) + rng.random(n)) / n for n in counts])
    labels = np.repeat(np.arange(len(counts)), counts)
    return labels[np.argsort(keys, kind="stable")]


def generate_standin(seed: int = 0) -> dict[str, list[tuple[int, str]]]:
    """The stand-in's splits as ``{split: [(label, sentence), ...]}`` in file order; deterministic for a seed.

    Class counts per split are ``STANDIN_CLASS_COUNTS``; labels are interleaved (``_interleaved_labels``).
    Sentences never contain a newline or carriage return, never start or end with a space and are never empty,
    so every pair is one valid stsa line. ``seed``: any non-negative integer.
    """
    rng = np.random.default_rng([seed, STANDIN_VERSION, 5_5_5])
    out: dict[str, list[tuple[int, str]]] = {}
    seen: set[str] = set()
    for split in SPLITS:
        labels = _interleaved_labels(rng, STANDIN_CLASS_COUNTS[split])
        lens = _lengths(rng, len(labels))
        rows = []
        for y, n in zip(labels, lens):
            text = _sentence(rng, int(y), int(n))
            while text in seen:  # duplicates only where placed on purpose below
                text = _sentence(rng, int(y), int(n))
            seen.add(text)
            rows.append((int(y), text))
        if split == "train":
            # a second copy of a few sentences, later in the file and with the same label (the real train split
            # has 10 duplicates)
            half = len(rows) // 2
            for s in rng.choice(np.arange(100, half), size=_TRAIN_DUPLICATES, replace=False):
                same = [i for i in range(half, len(rows)) if labels[i] == labels[s] and rows[i] != rows[s]]
                rows[same[int(rng.integers(len(same)))]] = rows[int(s)]
        out[split] = rows
    return out


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_standin(directory: str | os.PathLike, seed: int = 0) -> Path:
    """Write ``stsa.fine.{train,dev,test}`` and ``standin.json`` (generator version, seed, class counts, sha256 of
    each file) into ``directory`` (created), each file atomically (``gru4rec_conformance.fileio``); ``standin.json``
    is written last, so its presence means the set is complete.

    Returns the directory. Raises ``OSError`` naming the path when it cannot be written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    splits = generate_standin(seed)
    manifest: dict[str, Any] = {
        "generator": "gru4rec_conformance.datasets.sst5.standin",
        "version": STANDIN_VERSION,
        "seed": seed,
        "class_counts": STANDIN_CLASS_COUNTS,
        "files": {},
    }
    for split in SPLITS:
        data = "".join(f"{y} {t}\n" for y, t in splits[split]).encode("utf-8")
        _atomic_write(directory / f"stsa.fine.{split}", data)
        manifest["files"][f"stsa.fine.{split}"] = _sha256(data)
    _atomic_write(directory / "standin.json", (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    return directory


def _atomic_write(path: Path, data: bytes) -> None:
    try:
        atomic_write_bytes(path, data)
    except OSError as e:
        raise OSError(f"{path}: cannot write the SST-5 stand-in ({e})") from None


def _valid(directory: Path, seed: int) -> bool:
    """True when ``directory`` holds a complete stand-in of this generator version and seed, bytes intact."""
    try:
        m = json.loads((directory / "standin.json").read_text(encoding="utf-8"))
        if m.get("version") != STANDIN_VERSION or m.get("seed") != seed:
            return False
        return all(_sha256((directory / name).read_bytes()) == h for name, h in m["files"].items()) and set(
            m["files"]
        ) == {f"stsa.fine.{s}" for s in SPLITS}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def standin_dir(seed: int = 0, cache_dir: str | os.PathLike | None = None) -> Path:
    """A folder holding the stand-in of ``seed``: ``<cache_dir>/sst5-standin-v<version>-<code hash>-seed<seed>``
    (code hash: sha256 of this module's source, 12 hex digits), written on first use and reused while its
    ``standin.json`` matches the files (cheap to check: about 230 kB).

    ``cache_dir`` defaults to ``<system temp>/gru4rec-conformance-<user id>``. Concurrent callers (xdist workers)
    are safe: each writes a private temp folder and renames it into place; a loser of the race removes its copy.

    Raises ``OSError`` naming the folder when it cannot be written.
    """
    if cache_dir is None:
        uid = os.getuid() if hasattr(os, "getuid") else "user"
        cache_dir = Path(tempfile.gettempdir()) / f"gru4rec-conformance-{uid}"
    base = Path(cache_dir)
    # the generator's own bytes are part of the name: an edited generator never reuses an older cache
    code = _sha256(Path(__file__).read_bytes())[:12]
    target = base / f"sst5-standin-v{STANDIN_VERSION}-{code}-seed{seed}"
    if _valid(target, seed):
        return target
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=base))
    try:
        write_standin(tmp, seed)
        if target.exists() and not _valid(target, seed):
            shutil.rmtree(target, ignore_errors=True)  # a stale or broken copy
        try:
            os.replace(tmp, target)
        except OSError:
            if not _valid(target, seed):  # not a lost race: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    _prune(base, current=f"sst5-standin-v{STANDIN_VERSION}-{code}-")
    return target


#: Age (seconds) after which another generator version's stand-in, or a leftover temp folder, is removed: old
#: enough that no run of another checkout still reads it.
PRUNE_AGE_S = 24 * 3600


def _prune(base: Path, current: str, now: float | None = None) -> list[Path]:
    """Remove stand-ins of other generator versions (names not starting with ``current``) and leftover temp
    folders of interrupted writes under ``base``, once not modified for :data:`PRUNE_AGE_S` (a run of an older
    checkout may still use a younger one). Called after a stand-in is written, so a cache grows by at most one
    generation. Returns the removed folders; failures to remove are ignored (another user's folder, a race)."""
    now = time.time() if now is None else now
    removed = []
    for p in list(base.glob("sst5-standin-v*")) + list(base.glob(".sst5-standin-v*")):
        if p.name.startswith(current) or not p.is_dir():
            continue
        try:
            if now - p.stat().st_mtime < PRUNE_AGE_S:
                continue
        except OSError:
            continue
        shutil.rmtree(p, ignore_errors=True)
        if not p.exists():
            removed.append(p)
    return removed


@dataclass(frozen=True)
class SST5Data:
    """The fine-grained SST-5 splits a run uses, and where they came from.

    Attributes:
        name: ``'sst5'`` (the real files) or ``STANDIN_NAME`` (the synthetic stand-in); reports record it.
        splits: ``{'train', 'dev', 'test'}`` -> fine-grained ``Examples``.
        directory: the folder the stsa files were read from.
        real: True for the real SST-5 (its split sizes are the standard 8544/1101/2210).
        notice: empty for the real data, else one line saying why and which stand-in is used.
    """

    name: str
    splits: dict
    directory: Path
    real: bool
    notice: str = ""


def load_sst5_or_standin(seed: int = 0, cache_dir: str | os.PathLike | None = None) -> SST5Data:
    """The real SST-5 (``sst5_dir()``, counts asserted) when the shared data hold it, else the synthetic stand-in
    of ``seed`` (``standin_dir``) with a notice (the Yoochoose side does the same:
    ``datasets.sessions.real.yoochoose_100k``). Nothing is printed here; callers show ``notice``.

    Raises ``ValueError`` (file:line) for malformed real files or wrong real counts, ``OSError`` when the stand-in
    cannot be written.
    """
    from ..paths import shared_data_candidate
    from .views import load_sst5, sst5_dir

    d = sst5_dir()
    if d is not None:
        return SST5Data("sst5", load_sst5(d), d, True)
    sd = standin_dir(seed, cache_dir)
    notice = (
        f"real SST-5 not found in {shared_data_candidate() / 'sst5'} (set GRU4REC_SHARED_DATA to the folder "
        f"holding sst5/stsa.fine.*); using the synthetic stand-in ({STANDIN_NAME}, seed {seed}, "
        f"{'/'.join(str(sum(STANDIN_CLASS_COUNTS[s])) for s in SPLITS)} sentences, in {sd}); checks "
        "that assert the real split sizes are skipped"
    )
    return SST5Data(STANDIN_NAME, load_sst5(sd, check=False), sd, False, notice)
