"""Prose markup. A paragraph is built from pieces that carry both their wikitext and their plain
rendering (as wikiextractor renders it), so the plain text (the SQuAD context) and every fact's
span in it are exact."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from sample_world.names import ascii_fold
from sample_world.world import Entity


@dataclass
class Piece:
    wiki: str
    plain: str
    fact: tuple[str, str] | None = None  # (entity key, relation)


def T(text: str, fact=None) -> Piece:
    return Piece(text, text, fact)


def L(entity_or_title, label: str | None = None, fact=None) -> Piece:
    title = entity_or_title.title if isinstance(entity_or_title, Entity) else entity_or_title
    shown = label or title
    return Piece(f"[[{title}]]" if shown == title else f"[[{title}|{shown}]]", shown, fact)


def I(text: str, fact=None) -> Piece:  # noqa: E743 - wikitext italic; wikiextractor renders ''x'' as "x"
    return Piece(f"''{text}''", f'"{text}"', fact)


def B(text: str) -> Piece:
    return Piece(f"'''{text}'''", text)


def REF(rng: random.Random, refs: dict[str, str], source: str) -> Piece:
    """A citation: the first use defines a named ref, later uses are self-closing; plain: nothing."""
    if source in refs:
        return Piece(f'<ref name="{refs[source]}" />', "")
    if rng.random() < 0.6:
        refs[source] = f"r{len(refs) + 1}"
        return Piece(f'<ref name="{refs[source]}">{source}</ref>', "")
    return Piece(f"<ref>{source}</ref>", "")


class Paragraph:
    def __init__(self):
        self.pieces: list[Piece] = []

    def say(self, template: str, sep: str = " ", **slots) -> Paragraph:
        """Append one sentence: `{slot}` names a Piece (or a str) in `slots`, the rest is literal.
        `sep` goes between it and what came before ("" continues a sentence begun with `add`)."""
        if self.pieces and sep:
            self.pieces.append(T(sep))
        for i, part in enumerate(re.split(r"\{(\w+)\}", template)):
            if i % 2:
                slot = slots[part]
                self.pieces.append(slot if isinstance(slot, Piece) else T(str(slot)))
            elif part:
                if part.startswith(".") and self.pieces and self.pieces[-1].plain.endswith("."):
                    part = part[1:]  # "... Tomás Vráblik Jr." must not end in ".."
                self.pieces.append(T(part))
        return self

    def add(self, piece: Piece) -> Paragraph:
        self.pieces.append(piece)
        return self

    @property
    def wiki(self) -> str:
        return "".join(p.wiki for p in self.pieces)

    def plain_and_spans(self) -> tuple[str, list[tuple[tuple[str, str], int, str]]]:
        text, spans = "", []
        for p in self.pieces:
            plain = p.plain
            if p.fact:
                spans.append((p.fact, len(text) + (1 if plain.startswith('"') else 0), plain.strip('"')))
            text += plain
        return text, spans


def fact(entity: Entity, relation: str, link: Entity | None = None, italic: bool = False) -> Piece:
    value = entity.facts[relation]
    key = (entity.key, relation)
    if link is not None:
        return L(link, fact=key)
    return I(value, fact=key) if italic else T(value, fact=key)


def an(word: str) -> str:
    return ("an " if ascii_fold(word[0]).lower() in "aeiou" else "a ") + word  # "an Ålmarkish novelist"
