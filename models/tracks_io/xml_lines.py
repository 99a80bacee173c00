"""A small XML reader for annotation files: every element keeps the line it starts on, so a
refusal names it. Built on expat (no network, no external entities); a document type declaration
or an entity declaration is refused outright, as no annotation format uses one and entities are the
way XML files are made to expand without bound."""
from __future__ import annotations

from dataclasses import dataclass, field
from xml.parsers import expat

from models.tracks_io.records import TracksFormatError


@dataclass
class Element:
    tag: str
    attrib: dict[str, str]
    line: int
    children: list[Element] = field(default_factory=list)
    text: str = ""

    def find(self, tag: str) -> Element | None:
        return next((c for c in self.children if c.tag == tag), None)

    def findall(self, tag: str) -> list[Element]:
        return [c for c in self.children if c.tag == tag]


class _Refused(Exception):
    def __init__(self, line: int, message: str):
        self.line, self.message = line, message


def read_xml(text: str, *, what: str) -> Element:
    """The root element of ``text``; a file that is not well-formed XML is refused with its line
    (``TracksFormatError``, ``what`` names the file's kind)."""
    parser = expat.ParserCreate(encoding="utf-8")
    parser.buffer_text = True
    stack: list[Element] = []
    roots: list[Element] = []

    def start(tag, attrib):
        node = Element(tag=tag, attrib=attrib, line=parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)

    def end(tag):
        stack.pop()

    def chars(data):
        if stack and not stack[-1].children:     # the text of leaf elements only (meta values)
            stack[-1].text += data

    def refuse_doctype(*args):
        raise _Refused(parser.CurrentLineNumber, "a document type declaration (<!DOCTYPE ...>) is not part of the "
                                                 "format; remove it")

    def refuse_entity(*args):
        raise _Refused(parser.CurrentLineNumber, "an entity declaration (<!ENTITY ...>) is not part of the format; "
                                                 "remove it")

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = chars
    parser.StartDoctypeDeclHandler = refuse_doctype
    parser.EntityDeclHandler = refuse_entity
    try:
        parser.Parse(text, True)
    except _Refused as exc:
        raise TracksFormatError([(exc.line, exc.message)], what=what) from None
    except expat.ExpatError as exc:
        raise TracksFormatError([(exc.lineno, f"not well-formed XML: {expat.ErrorString(exc.code)} "
                                              f"(column {exc.offset + 1})")], what=what) from None
    if not roots:
        raise TracksFormatError([(0, "the file holds no XML element")], what=what)
    return roots[0]
