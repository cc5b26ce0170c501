"""Why a body is not JSON, in the words and at the offset Triton's parser (rapidjson) gives.

Python's parser finds that a body is not JSON; :func:`syntax_error` then reads the body again the way
rapidjson does (NaN and Infinity allowed, a NUL byte ends the text, a UTF-8 byte order mark skipped)
to say what rapidjson would say: ``"Missing a comma or '}' after an object member. at 7"``. It runs
only on bodies that failed, so it is written for clarity rather than speed.
"""

from __future__ import annotations

_WHITESPACE = b" \n\r\t"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
_ESCAPES = b'"\\/bfnrt'
_LITERALS = {ord("n"): b"null", ord("t"): b"true", ord("f"): b"false", ord("N"): b"NaN", ord("I"): b"Infinity"}
_BOM = b"\xef\xbb\xbf"


def not_json(body: bytes | bytearray, error: Exception) -> str:
    """Triton's message for a request body that is not JSON; ``error`` is what Python's parser said,
    used where rapidjson would have parsed the body (invalid UTF-8, which rapidjson passes through)."""
    return f"failed to parse the request JSON buffer: {syntax_error(body) or error}"


class _Failed(Exception):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


def syntax_error(body: bytes | bytearray) -> str | None:
    """rapidjson's error for ``body`` (``"Invalid value. at 1"``), or None if it would parse it."""
    text = bytes(body)
    end = text.find(b"\0")
    reader = _Reader(text[: len(text) if end < 0 else end])
    try:
        reader.document()
    except _Failed as failed:
        return f"{failed.message} at {failed.offset}"
    except RecursionError:  # nested deeper than this reader goes: Python's parser said why
        return None
    return None


class _Reader:
    """A recursive-descent JSON reader that fails as rapidjson does."""

    def __init__(self, text: bytes) -> None:
        self.text = text
        self.at = len(_BOM) if text.startswith(_BOM) else 0

    def peek(self) -> int:
        return self.text[self.at] if self.at < len(self.text) else 0

    def skip_whitespace(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in _WHITESPACE:
            self.at += 1

    def document(self) -> None:
        self.skip_whitespace()
        if self.peek() == 0:
            raise _Failed("The document is empty.", self.at)
        self.value()
        self.skip_whitespace()
        if self.peek() != 0:
            raise _Failed("The document root must not be followed by other values.", self.at)

    def value(self) -> None:
        char = self.peek()
        if char == ord("{"):
            self.object()
        elif char == ord("["):
            self.array()
        elif char == ord('"'):
            self.string()
        elif char in (ord("n"), ord("t"), ord("f")):
            self.literal(_LITERALS[char])
        else:
            self.number()

    def literal(self, word: bytes) -> None:
        for expected in word:
            if self.peek() != expected:
                raise _Failed("Invalid value.", self.at)
            self.at += 1

    def object(self) -> None:
        self.at += 1
        self.skip_whitespace()
        if self.peek() == ord("}"):
            self.at += 1
            return
        while True:
            if self.peek() != ord('"'):
                raise _Failed("Missing a name for object member.", self.at)
            self.string()
            self.skip_whitespace()
            if self.peek() != ord(":"):
                raise _Failed("Missing a colon after a name of object member.", self.at)
            self.at += 1
            self.skip_whitespace()
            self.value()
            self.skip_whitespace()
            char = self.peek()
            if char == ord("}"):
                self.at += 1
                return
            if char != ord(","):
                raise _Failed("Missing a comma or '}' after an object member.", self.at)
            self.at += 1
            self.skip_whitespace()

    def array(self) -> None:
        self.at += 1
        self.skip_whitespace()
        if self.peek() == ord("]"):
            self.at += 1
            return
        while True:
            self.value()
            self.skip_whitespace()
            char = self.peek()
            if char == ord("]"):
                self.at += 1
                return
            if char != ord(","):
                raise _Failed("Missing a comma or ']' after an array element.", self.at)
            self.at += 1
            self.skip_whitespace()

    def string(self) -> None:
        self.at += 1
        while True:
            char = self.peek()
            if char == ord('"'):
                self.at += 1
                return
            if char == 0:
                raise _Failed("Missing a closing quotation mark in string.", self.at)
            if char == ord("\\"):
                self.escape()
            elif char < 0x20:
                raise _Failed("Invalid escape character in string.", self.at)
            else:
                self.at += 1

    def escape(self) -> None:
        start = self.at
        self.at += 1
        char = self.peek()
        if char in _ESCAPES:
            self.at += 1
            return
        if char != ord("u"):
            raise _Failed("Invalid escape character in string.", start)
        self.at += 1
        code = self.hex4(start)
        if 0xD800 <= code <= 0xDBFF:
            if self.text[self.at : self.at + 2] != b"\\u":
                raise _Failed("The surrogate pair in string is invalid.", start)
            self.at += 2
            if not 0xDC00 <= self.hex4(start) <= 0xDFFF:
                raise _Failed("The surrogate pair in string is invalid.", start)
        elif 0xDC00 <= code <= 0xDFFF:
            raise _Failed("The surrogate pair in string is invalid.", start)

    def hex4(self, escape: int) -> int:
        digits = self.text[self.at : self.at + 4]
        if len(digits) < 4 or any(digit not in _HEX for digit in digits):
            raise _Failed("Incorrect hex digit after \\u escape in string.", escape)
        self.at += 4
        return int(digits, 16)

    def number(self) -> None:
        start = self.at
        if self.peek() == ord("-"):
            self.at += 1
        char = self.peek()
        if char in (ord("N"), ord("I")):
            self.literal(_LITERALS[char])
            return
        if char == ord("0"):
            self.at += 1
        elif char in _DIGITS:
            self.digits()
        else:
            raise _Failed("Invalid value.", self.at)
        if self.peek() == ord("."):
            self.at += 1
            if not self.digits():
                raise _Failed("Miss fraction part in number.", self.at)
        if self.peek() in (ord("e"), ord("E")):
            self.at += 1
            if self.peek() in (ord("+"), ord("-")):
                self.at += 1
            if not self.digits():
                raise _Failed("Miss exponent in number.", self.at)
        if float(self.text[start : self.at]) in (float("inf"), float("-inf")):
            raise _Failed("Number too big to be stored in double.", start)

    def digits(self) -> bool:
        """Take a run of digits; whether there was one."""
        begin = self.at
        while self.at < len(self.text) and self.text[self.at] in _DIGITS:
            self.at += 1
        return self.at > begin
