"""The course's terminology table (术语表), shared by every page: one Chinese name per concept, the section
labels every lesson uses in both languages, and the glossary's terms (lessons/docs/glossary*.md) with the
words that mark their use on a lesson page. tests/lessons/test_terms.py checks the pages against it; the
build links each glossary term's first use on a lesson page (course/glossary.py)."""

from __future__ import annotations

from typing import NamedTuple


class Term(NamedTuple):
    """One concept: its English and Chinese names, and the Chinese variants that must not appear (regular
    expressions, matched in prose outside code)."""

    en: str
    zh: str
    avoid: tuple[str, ...] = ()


TERMS = [
    Term("radix cache", "基数树缓存",
         (r"[Rr]adix ?(?:前缀)?缓存", r"[Rr]adix [Cc]ache", r"[Rr]adix ?树", r"基数树(?!缓存)", r"前缀树",
          r"前缀缓存树")),
    Term("admission, admit", "准入", (r"接纳",)),
    Term("retract, retraction", "撤回", (r"回退", r"(?<![A-Za-z_])[Rr]etract(?:ion|ed)?(?![A-Za-z_])")),
    Term("evict", "驱逐", (r"淘汰",)),
    Term("token (counted with 个)", "token",
         (r"(?<![A-Za-z_])TOKEN(?![A-Za-z_])", r"(?<![A-Za-z_])Tokens?(?![A-Za-z_])", r"枚")),
    Term("prompt", "prompt", (r"(?<![A-Za-z_])Prompts?(?![A-Za-z_])",)),
    Term("KV pool", "KV 池", (r"KV [Pp]ool",)),
    # the phase names; English only as a gloss in parentheses, and in code (`prefill`, EXTEND, DECODE)
    Term("prefill", "预填充", (r"(?<![A-Za-z_（-])[Pp]refill(?![A-Za-z_）-])", r"预填(?!充)")),
    Term("decode", "解码", (r"(?<![A-Za-z_（-])[Dd]ecode(?![A-Za-z_）-])",)),
]

# The labels of a lesson's sections: English (as the page writes it) -> Chinese. A zh page writes the label
# in the same form (bold lead-in or heading) wherever its English twin does.
SECTIONS = {
    "**What you will see.**": "**你将看到什么。**",
    "**Why it matters.**": "**为什么重要。**",
    "## The scenario": "## 场景",
    "## The scenarios": "## 场景",
    "## Step by step": "## 逐步拆解",
    "## Check yourself": "## 自测",
    "## Where it lives in SGLang": "## 在 SGLang 中的位置",
}


class Gloss(NamedTuple):
    """A glossary entry: its anchor on the glossary pages, and the words (regular expressions) that mark its
    use on an English and on a Chinese page."""

    anchor: str
    en: str
    zh: str


GLOSSARY = [
    Gloss("round", r"\brounds?\b", r"轮次"),
    Gloss("slot", r"\bslots?\b", r"槽位"),
    Gloss("kv-pool", r"\bKV pool\b", r"KV 池"),
    Gloss("row", r"\brows?\b", r"(?:(?<=[一两几每各这那哪多])|(?<=\d ))行(?![为动业驶李])"),
    Gloss("position", r"\bpositions?\b", r"(?<![A-Za-z_])position(?![A-Za-z_])"),
    Gloss("prefix", r"\bprefix(?:es)?\b", r"前缀"),
    Gloss("radix-cache", r"\bradix cache\b", r"基数树缓存"),
    Gloss("lock-ref", r"\block_ref\b", r"lock_ref"),
    Gloss("evictable", r"\bevictable\b", r"可驱逐"),
    Gloss("admission", r"\badmission\b|\badmit(?:s|ted)?\b", r"准入"),
    Gloss("future-tokens", r"\bfuture tokens?\b", r"将来(?:要生成)?的"),
    Gloss("new-token-ratio", r"\bnew_token_ratio\b", r"new_token_ratio"),
    Gloss("chunk", r"\bchunk(?:s|ed)?\b", r"分块|一块"),
    Gloss("retract", r"\bretract(?:s|ed|ion)?\b", r"撤回"),
    Gloss("extend", r"\bextend\b", r"(?<![A-Za-z_])extend(?![A-Za-z_])"),
    Gloss("placeholder", r"\bplaceholders?\b", r"占位"),
    Gloss("rid", r"\brids?\b", r"(?<![A-Za-z_])rid(?![A-Za-z_])"),
]
