"""Chat templates: render a model's ``tokenizer.chat_template`` (Jinja) into a prompt string.

A template ships inside a downloaded file, so it is untrusted input: it is compiled in jinja2's
``ImmutableSandboxedEnvironment`` (no attribute access to internals such as ``__class__``, no
mutation of the passed objects, bounded ``range``), with caps on string/list repetition and on
the output size. The environment matches the Hugging Face convention templates are written
for: ``trim_blocks``, ``lstrip_blocks``, ``loopcontrols``, ``{% generation %}`` blocks,
``raise_exception(msg)``, ``strftime_now(fmt)`` and a ``tojson`` that does not HTML-escape.

Every failure (syntax error, a ``raise_exception`` call, a sandbox violation, a runtime error)
raises ``ValueError`` naming the template and the problem.

    tmpl = ChatTemplate.from_vocab(vocab)                 # or ChatTemplate(source, bos_token="<s>")
    prompt = tmpl.render([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
"""
from __future__ import annotations

import json
from datetime import datetime

__all__ = ["ChatTemplate", "apply_chat_template", "MAX_OUTPUT_CHARS"]

MAX_OUTPUT_CHARS = 16 << 20          # a prompt longer than this is a runaway template
_MAX_REPEAT = 1 << 20                 # longest string/list a '*' may build


class _TemplateRaised(Exception):
    """raise_exception(...) called by the template."""


def _raise_exception(message=""):
    raise _TemplateRaised(str(message))


def _tojson(value, indent=None, separators=None, sort_keys=False, ensure_ascii=False):
    return json.dumps(value, indent=indent, separators=separators, sort_keys=sort_keys,
                      ensure_ascii=ensure_ascii)


def _strftime_now(fmt):
    return datetime.now().strftime(str(fmt))


_ENV = None


def _environment():
    global _ENV
    if _ENV is None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        class _Env(ImmutableSandboxedEnvironment):
            intercepted_binops = frozenset(["*", "**"])

            def unsafe_undefined(self, obj, attribute):
                # fail at the first unsafe access instead of rendering an empty value
                from jinja2.exceptions import SecurityError
                raise SecurityError(f"access to attribute {attribute!r} of a "
                                    f"{type(obj).__name__} object is not allowed")

            def call_binop(self, context, operator, left, right):
                if operator == "*":
                    for seq, n in ((left, right), (right, left)):
                        if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                            if len(seq) * max(n, 0) > _MAX_REPEAT:
                                raise _TemplateRaised(f"'*' would build a sequence of {len(seq) * n} items")
                if operator == "**" and isinstance(right, int) and abs(right) > 1024:
                    raise _TemplateRaised(f"exponent {right} is too large")
                return super().call_binop(context, operator, left, right)

        from jinja2.ext import Extension

        class _Generation(Extension):
            """{% generation %}...{% endgeneration %} marks the assistant's text for training
            masks; rendering just emits the body."""
            tags = {"generation"}

            def parse(self, parser):
                next(parser.stream)
                return parser.parse_statements(("name:endgeneration",), drop_needle=True)

        env = _Env(trim_blocks=True, lstrip_blocks=True, autoescape=False,
                   extensions=["jinja2.ext.loopcontrols", _Generation])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        _ENV = env
    return _ENV


class ChatTemplate:
    """A compiled chat template. `bos_token`/`eos_token` are the texts the template may use."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "", name: str = "chat template"):
        import jinja2
        if not isinstance(source, str) or not source.strip():
            raise ValueError(f"{name}: the template is empty")
        self.source, self.bos_token, self.eos_token, self.name = source, bos_token, eos_token, name
        try:
            self._template = _environment().from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise ValueError(f"{name}: syntax error at line {e.lineno}: {e.message}") from None
        except jinja2.TemplateError as e:
            raise ValueError(f"{name}: cannot compile: {e}") from None

    @classmethod
    def from_vocab(cls, vocab, name: str | None = None) -> "ChatTemplate":
        """The template stored in the GGUF (``tokenizer.chat_template``, or the named
        ``tokenizer.chat_template.<name>``), with the vocabulary's BOS/EOS texts."""
        templates = getattr(vocab, "chat_templates", {}) or {}
        source = templates.get(name) if name else getattr(vocab, "chat_template", None)
        if not source:
            what = f"no chat template named '{name}'" if name else "no chat template (tokenizer.chat_template)"
            raise ValueError(f"the model has {what}")

        def text(tid):
            return vocab.tokens[tid] if tid is not None else ""
        return cls(source, text(vocab.bos_id), text(vocab.eos_id),
                   name=f"chat template '{name}'" if name else "chat template")

    def render(self, messages, add_generation_prompt: bool = False, **variables) -> str:
        """The prompt for `messages` (a list of {"role": ..., "content": ...} dicts). Extra
        keyword arguments (tools, date_string, ...) are passed to the template."""
        import jinja2
        from jinja2.exceptions import SecurityError
        _check_messages(messages, self.name)
        ctx = dict(variables)
        ctx.setdefault("bos_token", self.bos_token)
        ctx.setdefault("eos_token", self.eos_token)
        ctx["messages"] = messages
        ctx["add_generation_prompt"] = bool(add_generation_prompt)
        try:
            parts, size = [], 0
            for chunk in self._template.generate(**ctx):
                size += len(chunk)
                if size > MAX_OUTPUT_CHARS:
                    raise _TemplateRaised(f"output exceeds {MAX_OUTPUT_CHARS} characters")
                parts.append(chunk)
            return "".join(parts)
        except _TemplateRaised as e:
            raise ValueError(f"{self.name} refused the conversation: {e}") from None
        except SecurityError as e:
            raise ValueError(f"{self.name} tried to leave the sandbox: {e}") from None
        except jinja2.TemplateError as e:
            raise ValueError(f"{self.name} failed: {type(e).__name__}: {e}") from None
        except RecursionError:
            raise ValueError(f"{self.name} failed: recursion too deep") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError,
                OverflowError) as e:
            raise ValueError(f"{self.name} failed: {type(e).__name__}: {e}") from None

    __call__ = render


def _check_messages(messages, name):
    if not isinstance(messages, (list, tuple)):
        raise ValueError(f"{name}: messages must be a list of dicts, got {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"{name}: message {i} must be a dict with a string 'role', got {m!r:.80}")


def apply_chat_template(source_or_vocab, messages, add_generation_prompt: bool = True, **variables) -> str:
    """Render `messages` with a template string or a vocabulary's own template."""
    tmpl = (ChatTemplate(source_or_vocab) if isinstance(source_or_vocab, str)
            else ChatTemplate.from_vocab(source_or_vocab))
    return tmpl.render(messages, add_generation_prompt=add_generation_prompt, **variables)
