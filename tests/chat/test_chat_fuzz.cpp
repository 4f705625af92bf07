// Fuzzing: random templates from a grammar of the language and random mutations of real templates,
// rendered over random contexts. Every render must either produce text or raise a TemplateError
// (never crash, hang or throw anything else); runaway loops and recursion stop with a clear error.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "chat/chat_template.h"
#include "golden_util.h"

namespace tessera::test {
namespace {

class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}

  std::string template_text() {
    std::string t;
    int n = 1 + pick(6);
    for (int i = 0; i < n; ++i) t += stmt(3);
    return t;
  }

  nlohmann::ordered_json context() {
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    const char* roles[] = {"system", "user", "assistant", "tool"};
    int n = pick(5);
    for (int i = 0; i < n; ++i) {
      nlohmann::ordered_json m = {{"role", roles[pick(4)]}};
      switch (pick(4)) {
        case 0: m["content"] = some_string(); break;
        case 1: m["content"] = {{{"type", "text"}, {"text", some_string()}}}; break;
        case 2: m["content"] = nullptr; break;
        default: break;
      }
      if (pick(3) == 0)
        m["tool_calls"] = {{{"type", "function"},
                            {"function", {{"name", "f"}, {"arguments", pick(2) ? nlohmann::ordered_json("{\"a\": 1}")
                                                                              : nlohmann::ordered_json{{"a", 1}}}}}}};
      if (pick(4) == 0) m["reasoning_content"] = some_string();
      msgs.push_back(m);
    }
    nlohmann::ordered_json ctx = {{"messages", msgs}, {"add_generation_prompt", pick(2) == 0}};
    if (pick(2)) ctx["tools"] = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}};
    if (pick(2)) ctx["enable_thinking"] = pick(2) == 0;
    ctx["bos_token"] = "<s>";
    return ctx;
  }

 private:
  std::mt19937 rng_;
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  template <size_t N>
  const char* any(const char* const (&xs)[N]) {
    return xs[pick(static_cast<int>(N))];
  }

  std::string some_string() {
    static const char* const s[] = {"", "hi", "héllo wörld", "a\nb", "  pad  ", "{\"k\": [1, 2]}", "😀", "it's \"q\"",
                                    "<think>x</think>y", "A,B,,C"};
    return any(s);
  }

  std::string open() { return any({"{%", "{%-", "{%+"}); }
  std::string close() { return any({"%}", "-%}", "+%}"}); }
  std::string tag(const std::string& body) { return open() + " " + body + " " + close(); }

  std::string atom() {
    static const char* const atoms[] = {
        "0", "1", "-3", "2.5", "1e300", "9223372036854775807", "'a'", "\"b c\"", "'héllo'", "''", "'%s-%d'",
        "'{}{name}'", "none", "true", "False", "messages", "tools", "x", "ns", "loop", "m", "range", "nope",
        "message", "item", "messages[0]", "enable_thinking", "add_generation_prompt", "bos_token", "[]", "{}",
        "(1, 2)", "'\\n\\t\\u00e9'"};
    return any(atoms);
  }

  std::string args(int d) {
    std::string a;
    int n = pick(4);
    for (int i = 0; i < n; ++i) a += (i ? ", " : "") + expr(d);
    if (pick(4) == 0) a += std::string(n ? ", " : "") + any({"attribute", "default", "indent", "reverse"}) + "=" + expr(d);
    return a;
  }

  std::string expr(int d) {
    if (d <= 0) return atom();
    switch (pick(16)) {
      case 0: return atom();
      case 1:
        return expr(d - 1) + " " +
               any({"+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"}) + " " +
               expr(d - 1);
      case 2: return "(" + expr(d - 1) + ")";
      case 3: {
        static const char* const f[] = {"tojson", "length", "trim", "string", "default", "join", "map", "select",
                                        "selectattr", "rejectattr", "first", "last", "list", "unique", "dictsort",
                                        "items", "sort", "round", "indent", "format", "batch", "sum", "min", "max",
                                        "abs", "int", "float", "upper", "title", "replace", "safe", "wordcount",
                                        "reverse", "capitalize", "center", "truncate", "count", "e", "from_json"};
        std::string fs = expr(d - 1) + " | " + any(f);
        if (pick(2)) fs += "(" + args(d - 1) + ")";
        return fs;
      }
      case 4:
        return expr(d - 1) + " is " + (pick(2) ? "not " : "") +
               any({"defined", "none", "string", "mapping", "iterable", "number", "sequence", "odd", "even",
                    "boolean", "true", "false", "equalto 1", "divisibleby 0", "in [1]", "nosuch"});
      case 5: return expr(d - 1) + " if " + expr(d - 1) + (pick(2) ? " else " + expr(d - 1) : "");
      case 6: return "[" + args(d - 1) + "]";
      case 7: return "{" + expr(d - 1) + ": " + expr(d - 1) + "}";
      case 8: return expr(d - 1) + "." + any({"content", "role", "items", "append", "function", "a", "__class__", "c"});
      case 9: return expr(d - 1) + "[" + expr(d - 1) + "]";
      case 10: return expr(d - 1) + "[" + (pick(2) ? expr(d - 1) : "") + ":" + (pick(2) ? expr(d - 1) : "") + (pick(2) ? "::-1" : "") + "]";
      case 11: {
        static const char* const m[] = {"strip", "split", "startswith", "endswith", "replace", "upper", "get", "items",
                                        "keys", "format", "join", "append", "pop", "count", "title", "find"};
        return expr(d - 1) + "." + any(m) + "(" + args(d - 1) + ")";
      }
      case 12:
        return std::string(any({"range", "namespace", "dict", "raise_exception", "strftime_now", "cycler", "joiner", "m"})) +
               "(" + args(d - 1) + ")";
      case 13: return std::string(any({"not ", "-", "+"})) + expr(d - 1);
      case 14: return "loop." + std::string(any({"index", "index0", "first", "last", "length", "revindex", "previtem", "nextitem"}));
      default: return expr(d - 1) + " | tojson(indent=" + any({"2", "none", "'\\t'"}) + ")";
    }
  }

  std::string stmt(int d) {
    if (d <= 0) return pick(2) ? "text " : "{{ " + expr(2) + " }}";
    switch (pick(13)) {
      case 0: return any({"plain ", "\n", "  indented\n", "é "});
      case 1: return "{{ " + expr(3) + " }}";
      case 2: return tag("if " + expr(2)) + stmt(d - 1) + (pick(2) ? tag("elif " + expr(2)) + stmt(d - 1) : "") +
                     (pick(2) ? tag("else") + stmt(d - 1) : "") + tag("endif");
      case 3: return tag("for " + std::string(any({"x", "item", "k, v", "message"})) + " in " + expr(2) +
                         (pick(3) == 0 ? " if " + expr(1) : "")) +
                     stmt(d - 1) + stmt(d - 1) + (pick(3) == 0 ? tag("else") + stmt(d - 1) : "") + tag("endfor");
      case 4: return tag("set " + std::string(any({"x", "ns", "item", "a, b"})) + " = " + expr(2));
      case 5: return tag("set ns = namespace(c=0)") + tag("set ns.c = " + expr(2));
      case 6: return tag("set x") + stmt(d - 1) + tag("endset");
      case 7: return tag("macro m(a, b=1)") + stmt(d - 1) + (pick(3) == 0 ? "{{ m(a) }}" : "") + tag("endmacro") +
                     "{{ m(" + expr(1) + ") }}";
      case 8: return tag("macro w()") + "[{{ caller() }}]" + tag("endmacro") + tag("call w()") + stmt(d - 1) + tag("endcall");
      case 9: return tag("filter " + std::string(any({"upper", "trim", "indent(2)", "tojson", "nosuch"}))) + stmt(d - 1) +
                     tag("endfilter");
      case 10: return tag(any({"break", "continue"}));
      case 11: return tag("generation") + stmt(d - 1) + tag("endgeneration");
      default: return "{# c #}" + stmt(d - 1);
    }
  }
};

// Renders and reports anything other than text or a TemplateError.
void render_safely(const std::string& src, const nlohmann::ordered_json& ctx, const chat::RenderOptions& opts) {
  try {
    ChatTemplate::from_string(src).render(ctx, opts);
  } catch (const chat::TemplateError&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-template exception " << e.what() << " for template:\n" << src;
  }
}

chat::RenderOptions fuzz_options() {
  auto o = frozen_clock_options();
  o.max_loop_iterations = 200000;
  return o;
}

TEST(ChatFuzz, GrammarTemplates) {
  auto opts = fuzz_options();
  Gen gen(12345);
  for (int i = 0; i < 4000; ++i) {
    std::string src = gen.template_text();
    render_safely(src, gen.context(), opts);
    if (HasFailure()) break;
  }
}

TEST(ChatFuzz, MutatedRealTemplates) {
  TESSERA_REQUIRE_REFERENCE();
  auto dir = reference_dir() / "chat-templates";
  std::vector<nlohmann::ordered_json> contexts;
  for (auto& e : std::filesystem::directory_iterator(dir / "contexts"))
    contexts.push_back(nlohmann::ordered_json::parse(read_file(e.path())));
  std::vector<std::string> templates;
  for (auto& e : std::filesystem::directory_iterator(dir / "templates")) templates.push_back(read_file(e.path()));
  std::sort(templates.begin(), templates.end());
  std::mt19937 rng(777);
  auto opts = fuzz_options();
  static const char* const inserts[] = {"{%", "%}", "{{", "}}", "(", ")", "|", "'", "\"", "-", "{% endif %}",
                                        "{% for x in y %}", "[", "]", " is ", ".", "{#", "\\"};
  for (size_t t = 0; t < templates.size(); ++t) {
    for (int k = 0; k < 15; ++k) {
      std::string s = templates[t];
      int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits && !s.empty(); ++e) {
        size_t at = rng() % s.size();
        size_t len = std::min<size_t>(1 + rng() % 40, s.size() - at);
        switch (rng() % 3) {
          case 0: s.erase(at, len); break;
          case 1: s.insert(at, s.substr(at, len)); break;
          default: s.insert(at, inserts[rng() % std::size(inserts)]); break;
        }
      }
      render_safely(s, contexts[rng() % contexts.size()], opts);
      if (HasFailure()) return;
    }
  }
}

TEST(ChatFuzz, RunawayTemplatesStopWithAClearError) {
  struct Case {
    const char* src;
    const char* type;
  };
  const Case cases[] = {
      {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "RuntimeError"},
      {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError"},
      {"{% macro f(n) %}{{ (((((((((((((((((((f(n)))))))))))))))))))) }}{% endmacro %}{{ f(1) }}", "RecursionError"},
      {"{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}", "RecursionError"},
      {"{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", "MemoryError"},
      {"{{ 'x' * 9223372036854775807 }}", "MemoryError"},
      {"{{ '' * 9223372036854775807 }}|{{ [] * 9223372036854775807 }}", ""},
      {"{{ 'a'.center(9223372036854775807) }}", "MemoryError"},
  };
  for (auto& c : cases) {
    auto start = std::chrono::steady_clock::now();
    std::string type;
    try {
      ChatTemplate::from_string(c.src).render(nlohmann::ordered_json::object(), frozen_clock_options());
    } catch (const chat::TemplateError& e) {
      type = e.type();
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(type, c.type) << c.src;
    EXPECT_LT(secs, 10.0) << c.src;
  }
}

}  // namespace
}  // namespace tessera::test
