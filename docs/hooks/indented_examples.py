"""A griffe extension for the API reference: keeps a docstring's indented example a code block.

Python's ``inspect.cleandoc`` (what griffe applies) takes the indentation common to the lines
after the first one away. In a docstring whose only body is an example,

    def map(self, func, output_type=None):
        \"\"\"One record out per record in.

            ds.map(lambda word: (word, 1))
        \"\"\"

that is the example's own indentation, and Markdown then reads it as a paragraph. This dedents
the body by the column of the opening quotes instead, as the source shows it.
"""
from __future__ import annotations

import re

import griffe

OPENING = re.compile(r'^(\s*)[rR]?("""|\'\'\')')


class IndentedExamples(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        docstring = obj.docstring
        source = docstring.source if docstring else None
        opening = OPENING.match(source or "")
        if not opening or "\\" in source:     # an escape would make the source differ from the value
            return
        column, quotes = len(opening.group(1)), opening.group(2)
        lines = source[opening.end():].rsplit(quotes, 1)[0].split("\n")
        body = [line[column:] if line[:column].isspace() else line.lstrip() for line in lines[1:]]
        docstring.value = "\n".join([lines[0].strip(), *body]).strip()
