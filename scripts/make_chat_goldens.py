#!/usr/bin/env python3
"""Render Tessera's own chat-template contexts with Hugging Face transformers' own renderer.

Writes the goldens tests/chat/test_chat_goldens.cpp (OwnContexts) checks: every context in
CONTEXTS_DIR rendered through every template in TEMPLATES_DIR by
transformers.utils.chat_template_utils.render_jinja_template, with strftime_now frozen at
2024-09-03 12:00 (as in the shared reference renders).  Each output line:
  {"template": "templates/<file>", "context": "contexts/<file>", "ok": bool,
   "output": str | null, "error": str | null}

With --bench FILE.json it also times transformers rendering FILE.json through the Qwen3 and
Llama 3.1 templates (the peer of bench/chat/bench_chat_template).

Without transformers installed it falls back to Jinja2 set up exactly as transformers' renderer
sets it up (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, the
`generation` tag, tojson, raise_exception, strftime_now; tools and documents passed as None when
absent) and says so; the reference renders show the two agree byte for byte.

Meant for Python 3.12 with transformers (5.x) and jinja2:
  python3 scripts/make_chat_goldens.py TEMPLATES_DIR tests/chat/contexts \\
      tests/chat/goldens/own_renders.jsonl --bench bench/chat/conversation_10.json
"""
import argparse
import datetime
import json
import pathlib
import statistics
import sys
import time

import jinja2

FROZEN_NOW = datetime.datetime(2024, 9, 3, 12, 0, 0)


class FrozenDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FROZEN_NOW


try:
    import transformers
    from transformers.utils import chat_template_utils

    # transformers' strftime_now calls datetime.now() from this module; freeze it before any
    # template is compiled (compiled templates are cached).
    chat_template_utils.datetime = FrozenDatetime
    RENDERER = f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}"
except ImportError:
    chat_template_utils = None
    RENDERER = f"jinja2 {jinja2.__version__} set up as transformers' renderer (transformers not installed)"


def jinja2_env():
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FROZEN_NOW.strftime(fmt)
    return env


_compiled = {}


def render(template_src, ctx):
    ctx = dict(ctx)
    messages = ctx.pop("messages")
    if chat_template_utils is None:
        if template_src not in _compiled:
            _compiled[template_src] = jinja2_env().from_string(template_src)
        return _compiled[template_src].render(
            messages=messages, tools=ctx.pop("tools", None), documents=ctx.pop("documents", None),
            add_generation_prompt=ctx.pop("add_generation_prompt", False), **ctx)
    rendered = chat_template_utils.render_jinja_template(
        conversations=[messages],
        tools=ctx.pop("tools", None),
        documents=ctx.pop("documents", None),
        chat_template=template_src,
        add_generation_prompt=ctx.pop("add_generation_prompt", False),
        **ctx,
    )
    if isinstance(rendered, tuple):  # (rendered, generation_indices)
        rendered = rendered[0]
    return rendered[0] if isinstance(rendered, list) else rendered


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("templates_dir", type=pathlib.Path)
    ap.add_argument("contexts_dir", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--bench", type=pathlib.Path, help="context to time through Qwen3 and Llama 3.1")
    args = ap.parse_args()

    templates = sorted(args.templates_dir.glob("*.jinja"))
    contexts = sorted(args.contexts_dir.glob("*.json"))
    if not templates or not contexts:
        sys.exit(f"no templates in {args.templates_dir} or no contexts in {args.contexts_dir}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    n_ok = 0
    with open(args.out, "w", encoding="utf-8") as fo:
        for t in templates:
            src = t.read_text(encoding="utf-8")
            for c in contexts:
                ctx = json.loads(c.read_text(encoding="utf-8"))
                rec = {"template": f"templates/{t.name}", "context": f"contexts/{c.name}"}
                try:
                    rec.update(ok=True, output=render(src, ctx), error=None)
                    n_ok += 1
                except Exception as e:  # the template raised: the engine must raise too
                    rec.update(ok=False, output=None, error=f"{type(e).__name__}: {e}")
                fo.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"{RENDERER}: {len(templates)} templates x {len(contexts)} contexts, {n_ok} rendered -> {args.out}")

    if args.bench:
        ctx = json.loads(args.bench.read_text(encoding="utf-8"))
        print(f"{RENDERER}:")
        print("| template | Python render median (µs) | p90 (µs) |")
        print("|---|---:|---:|")
        for name in ("Qwen-Qwen3-0.6B.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                     "Qwen-Qwen2.5-7B-Instruct.jinja", "openai-gpt-oss-120b.jinja"):
            src = (args.templates_dir / name).read_text(encoding="utf-8")
            render(src, ctx)  # compile once (cached by transformers)
            times = []
            for _ in range(500):
                start = time.perf_counter()
                render(src, ctx)
                times.append((time.perf_counter() - start) * 1e6)
            times.sort()
            print(f"| {name} | {statistics.median(times):.1f} | {times[len(times) * 9 // 10]:.1f} |")


if __name__ == "__main__":
    main()
