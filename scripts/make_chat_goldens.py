#!/usr/bin/env python3
"""Render Tessera's own chat-template contexts with Hugging Face transformers' own renderer.

Writes the goldens tests/chat/test_chat_goldens.cpp (OwnContexts) checks: every context in
CONTEXTS_DIR rendered through every template in TEMPLATES_DIR by
transformers.utils.chat_template_utils.render_jinja_template, with strftime_now frozen at
2024-09-03 12:00 (as in the shared reference renders).  Each output line:
  {"template": "templates/<file>", "context": "contexts/<file>", "ok": bool,
   "output": str | null, "error": str | null}

With --fuzz N FILE.jsonl it also writes N random templates from a grammar of the language, each
with a random context, and what the same renderer made of them (differential goldens for the
engine's semantics: filters, tests, methods, operators, formatting, scoping, whitespace control).
Rows whose output holds a memory address (reprs of generators and methods) are left out.

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
        return compiled(template_src).render(
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


def compiled(template_src):
    """The template compiled by the renderer in use (transformers' own environment when installed)."""
    compile_with_transformers = getattr(chat_template_utils, "_compile_jinja_template", None)
    if compile_with_transformers is not None:
        return compile_with_transformers(template_src)
    if template_src not in _compiled:
        _compiled[template_src] = jinja2_env().from_string(template_src)
    return _compiled[template_src]


class FuzzGrammar:
    ATOMS = ["0", "1", "-3", "2.5", "0.1", "1e-7", "7", "'a'", '"b c"', "'héllo'", "''", "'%s-%d'", "'{}{name}'",
             "'{:>5}'", "none", "true", "False", "messages", "tools", "x", "ns.c", "nope", "messages[0]",
             "messages[-1]", "messages[0].content", "enable_thinking", "'  Pad  '", "'A,B,,C'", "[]", "{}", "(1, 2)",
             "[1, 'a', none]", "{'k': 1, 'j': [2.0]}", "'\\n\\t'", "'<b>&'", "[3, 1, 2]", "['b', 'A', 'c']", "d",
             "d.items()", "1.0", "3.14159", "-0.0", "'ß'", "'ǅx'"]
    NAMES = ["messages", "tools", "x", "ns.c", "d", "messages[0].content", "nope"]
    # Generator results are listed: printing a generator shows its memory address.
    FILTERS = ["tojson", "length", "trim", "string", "default", "join", "map('upper') | list",
               "map(attribute='role') | list", "select | list", "reject('none') | list", "selectattr('role') | list",
               "rejectattr('role', 'equalto', 'user') | list", "first", "last", "list", "unique | list", "dictsort",
               "items | list", "sort", "round", "round(1)", "indent", "indent(2, true)", "format(1, 2)",
               "batch(2) | list", "sum", "min", "max", "abs", "int", "float", "upper", "lower", "title", "capitalize",
               "replace('a', 'X')", "safe", "wordcount", "reverse | list", "center(9)", "truncate(5, leeway=0)", "count", "e",
               "tojson(indent=2)", "tojson(sort_keys=true)", "default('D', true)", "join(', ')", "list | length",
               "string | length", "first | string"]
    TESTS = ["defined", "none", "string", "mapping", "iterable", "number", "sequence", "odd", "even", "boolean", "true",
             "false", "equalto 1", "in [1, 'a']", "integer", "float", "lower", "upper", "sameas none", "divisibleby 2"]
    METHODS = ["strip()", "split()", "split(',')", "startswith('a')", "endswith(('x', 'C'))", "replace('a', 'b')",
               "upper()", "get('k')", "get('role', 'z')", "items()", "keys()", "values()", "format(1, name=2)",
               "join(['x', 'y'])", "count('a')", "title()", "find('l')", "lstrip('A')", "rstrip()", "splitlines()",
               "capitalize()", "center(7, '*')", "rsplit(',', 1)", "partition(',')", "isdigit()"]
    OPS = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]

    def __init__(self, seed):
        import random
        self.r = random.Random(seed)

    def pick(self, xs):
        return self.r.choice(xs)

    def expr(self, d):
        if d <= 0:
            return self.pick(self.ATOMS)
        k, e = self.r.randrange(14), lambda: self.expr(d - 1)
        if k == 0: return self.pick(self.ATOMS)
        if k == 1: return f"{e()} {self.pick(self.OPS)} {e()}"
        if k == 2: return f"({e()})"
        if k in (3, 4): return f"{e()} | {self.pick(self.FILTERS)}"
        if k == 5: return f"{e()} is {self.pick(['', 'not '])}{self.pick(self.TESTS)}"
        if k == 6: return f"{e()} if {e()} else {e()}"
        if k == 7: return f"[{e()}, {e()}]"
        if k == 8: return f"{e()}.{self.pick(['content', 'role', 'a', 'k', 'c'])}"
        if k == 9: return self.pick(self.NAMES) + "[" + self.pick(["0", "1", "-1", '"k"', '"role"', "1:", "::-1", ":2", "1:3:2"]) + "]"
        if k in (10, 11): return f"{e()}.{self.pick(self.METHODS)}"
        if k == 12: return f"{self.pick(['not ', '-'])}{e()}"
        return f"'%s|%r|%5.2f' % ({e()}, {e()}, 2.5)"

    def stmt(self, d):
        k = self.r.randrange(9 if d > 0 else 2)
        o, c = (lambda: self.pick(["{%", "{%-", "{%+"])), (lambda: self.pick(["%}", "-%}", "+%}"]))
        s, e = (lambda: self.stmt(d - 1)), (lambda n: self.expr(n))
        if k == 0: return self.pick(["t ", "\n", "  x\n", "é "])
        if k == 1: return "{{ " + e(3) + " }}"
        if k == 2: return f"{o()} if {e(2)} {c()}{s()}{o()} else {c()}{s()}{o()} endif {c()}"
        if k == 3:
            return (f"{o()} for x in {e(2)} {c()}{{{{ loop.index }}}}:{{{{ x }}}} {s()}{o()} else {c()}E"
                    f"{o()} endfor {c()}")
        if k == 4: return f"{o()} set x = {e(2)} {c()}"
        if k == 5: return f"{o()} set ns.c = {e(2)} {c()}"
        if k == 6: return f"{o()} macro m(a, b=2) {c()}[{{{{ a }}}}{{{{ b }}}}{s()}]{o()} endmacro {c()}{{{{ m({e(1)}) }}}}"
        if k == 7: return "  {# c #}\n" + s()
        return f"{o()} filter {self.pick(['upper', 'trim', 'indent(2)'])} {c()}{s()}{o()} endfilter {c()}"

    def context(self):
        msgs = [{"role": self.pick(["user", "assistant", "system"]),
                 "content": self.pick(["hi", "Héllo wörld", "a\nb", ["x"], None, "  sp  "])} for _ in range(self.r.randrange(4))]
        return {"messages": msgs, "tools": self.pick([None, [{"type": "function", "function": {"name": "f"}}]]),
                "x": self.pick([1, "s", [1, 2], {"a": 1}, None, 2.5]), "enable_thinking": self.pick([True, False]),
                "d": {"k": 1, "role": "r", "items": [1]}, "add_generation_prompt": False, "documents": None}

    def template(self):
        return "{% set ns = namespace(c=0) %}" + "".join(self.stmt(2) for _ in range(self.r.randrange(1, 4)))


def write_fuzz(n, out):
    import warnings
    warnings.simplefilter("ignore")  # Python warns about subscripting constants in compiled templates
    grammar, rows = FuzzGrammar(20261130), 0
    with open(out, "w", encoding="utf-8") as fo:
        while rows < n:
            src, ctx = grammar.template(), grammar.context()
            rec = {"src": src, "context": ctx}
            try:
                rec.update(ok=True, output=compiled(src).render(**ctx), error=None)
            except Exception as e:
                rec.update(ok=False, output=None, error=f"{type(e).__name__}: {e}")
            if " at 0x" in (rec["output"] or "") + (rec["error"] or ""):  # a repr holding an address
                continue
            fo.write(json.dumps(rec, ensure_ascii=False) + "\n")
            rows += 1
    print(f"{RENDERER}: {n} random templates -> {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("templates_dir", type=pathlib.Path)
    ap.add_argument("contexts_dir", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--bench", type=pathlib.Path, help="context to time through Qwen3 and Llama 3.1")
    ap.add_argument("--fuzz", nargs=2, metavar=("N", "OUT"), help="write N random templates and their renders")
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

    if args.fuzz:
        write_fuzz(int(args.fuzz[0]), pathlib.Path(args.fuzz[1]))

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
