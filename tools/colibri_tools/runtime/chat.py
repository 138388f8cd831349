"""Chat templates: the jinja2 template a checkpoint ships (``chat_template.jinja``,
or ``chat_template`` in ``tokenizer_config.json``) rendered the way
transformers' ``apply_chat_template`` renders it, so the same conversation
gives the same text and token ids (tests/tools/test_chat.py compares them).

    template = ChatTemplate.from_model_dir("out/model")        # None-safe: .load() raises
    text = template.render([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    ids = tokenizer.encode(text, add_special_tokens=False).ids

What transformers does and this does too: a sandboxed jinja2 environment
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, the loopcontrols
extension), a ``tojson`` filter that does not escape HTML and takes indent /
separators / sort_keys, the globals ``raise_exception``, ``strftime_now``,
``dict`` and ``namespace`` (no underscore names on it), the variables
``messages``, ``tools``, ``documents``, ``add_generation_prompt`` and the
named special tokens (``bos_token``, ``eos_token``, ...) from
tokenizer_config.json; the rendered text is encoded without adding special
tokens. Not done: tool schemas from Python functions, assistant masks,
``continue_final_message``.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import ColibriError

# Files colibri-convert copies from a checkpoint (checkpoint name -> name in the output).
TOKENIZER_CONFIG = "model_tokenizer_config.json"
GENERATION_CONFIG = "model_generation_config.json"
CHAT_TEMPLATE_FILE = "model_chat_template.jinja"
COMPANION_FILES = {"tokenizer_config.json": TOKENIZER_CONFIG,
                   "generation_config.json": GENERATION_CONFIG,
                   "chat_template.jinja": CHAT_TEMPLATE_FILE}
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                       "cls_token", "mask_token")


class ChatTemplateError(ColibriError):
    """A chat template is missing, does not compile, or refused the conversation."""


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from path ({} when the file does not exist)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ChatTemplateError(f"cannot read: {exc}", path=path) from exc
    if not isinstance(data, dict):
        raise ChatTemplateError("not a JSON object", path=path)
    return data


def special_tokens(tokenizer_config: Mapping[str, Any]) -> dict[str, str]:
    """The named special tokens as strings (an AddedToken dict gives its content)."""
    out = {}
    for name in SPECIAL_TOKEN_NAMES:
        value = tokenizer_config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[name] = value
    return out


def template_text(tokenizer_config: Mapping[str, Any], jinja_file: Path | None) -> str | None:
    """The template: the .jinja file if there is one, else tokenizer_config's
    chat_template (a string, or a list of {name, template}: the "default")."""
    if jinja_file is not None and jinja_file.is_file():
        return jinja_file.read_text(encoding="utf-8")
    value = tokenizer_config.get("chat_template")
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        value = named.get("default")
    return value if isinstance(value, str) and value else None


def _environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    class TemplateDict:
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            TemplateNamespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"chat templates cannot store underscore attributes on a namespace: {name!r}")

    class GenerationBlock(jinja2.ext.Extension):
        """{% generation %}...{% endgeneration %} (assistant-mask markers): rendered as is."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now,
                       dict=TemplateDict(), namespace=TemplateNamespace)
    return env


class ChatTemplate:
    """A compiled chat template and the special tokens it is rendered with."""

    def __init__(self, source: str, specials: Mapping[str, str] | None = None,
                 path: str | Path | None = None) -> None:
        import jinja2

        self.source, self.specials, self.path = source, dict(specials or {}), path
        try:
            self._template = _environment().from_string(source)
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"the chat template does not compile: {exc}",
                                    path=path) from exc

    @classmethod
    def from_model_dir(cls, model_dir: str | Path) -> ChatTemplate | None:
        """The template a colibri-convert output holds, or None when it has none."""
        d = Path(model_dir)
        config = read_json(d / TOKENIZER_CONFIG)
        source = template_text(config, d / CHAT_TEMPLATE_FILE)
        if source is None:
            return None
        where = d / CHAT_TEMPLATE_FILE if (d / CHAT_TEMPLATE_FILE).is_file() else d / TOKENIZER_CONFIG
        return cls(source, special_tokens(config), where)

    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
               tools: list[dict] | None = None, documents: list[dict] | None = None,
               **kwargs: Any) -> str:
        import jinja2

        for message in messages:
            if not isinstance(message, Mapping):
                raise ChatTemplateError(f"a message must be a dict, got {message!r}")
        variables = {**self.specials, **kwargs}
        try:
            return self._template.render(messages=[dict(m) for m in messages], tools=tools,
                                         documents=documents,
                                         add_generation_prompt=add_generation_prompt, **variables)
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"the chat template refused the conversation: {exc}",
                                    path=self.path) from exc
