// jinja2's global functions plus transformers' raise_exception/strftime_now, and the argument
// helpers the builtins share.
#include <cmath>
#include <cstdio>
#include <ctime>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"

namespace tessera::chat {

void type_error(const std::string& msg) { throw TemplateError("TypeError", msg); }

int64_t to_int(const Value& v, const char* what) {
  if (v.kind == Kind::Int) return v.i;
  if (v.kind == Kind::Bool) return v.b;
  if (v.is_undefined()) fail_undefined(v);
  std::string msg = "'";
  msg += type_name(v);
  msg += "' object cannot be interpreted as an integer (";
  msg += what;
  type_error(msg + ")");
}

void check_width(int64_t width) {
  if (width > (int64_t{1} << 26)) throw TemplateError("MemoryError", "width " + std::to_string(width) + " is too large");
}

namespace {

// Sandboxed range(): jinja2 refuses ranges longer than MAX_RANGE.
constexpr int64_t kMaxRange = 100000;

Value g_range(Interpreter&, CallArgs& a) {
  if (!a.kw.empty()) type_error("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) type_error("range expected 1 to 3 arguments");
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = to_int(a.pos[0], "range");
  } else {
    start = to_int(a.pos[0], "range");
    stop = to_int(a.pos[1], "range");
    if (a.pos.size() == 3) step = to_int(a.pos[2], "range");
  }
  if (step == 0) throw TemplateError("ValueError", "range() arg 3 must not be zero");
  double n = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
  if (n > static_cast<double>(kMaxRange))
    throw TemplateError("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::integer(i));
  return Value::new_list(std::move(items));
}

void fill_from(Interpreter& in, Dict& d, CallArgs& a, const char* fn) {
  if (a.pos.size() > 1) type_error(std::string(fn) + " expected at most 1 positional argument");
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.is_mapping()) {
      for (auto& [k, v] : src.dict->items) d.set(k, v);
    } else {
      for (auto& pair : in.iterate(src)) {
        auto kv = in.iterate(pair);
        if (kv.size() != 2) throw TemplateError("ValueError", std::string(fn) + " sequence element has wrong length");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) d.set(Value::string(k), v);
}

Value g_dict(Interpreter& in, CallArgs& a) {
  Value d = Value::new_dict();
  fill_from(in, *d.dict, a, "dict");
  return d;
}

Value g_namespace(Interpreter& in, CallArgs& a) {
  Value d = Value::new_dict(DictKind::Namespace);
  fill_from(in, *d.dict, a, "namespace");
  return d;
}

Value g_cycler(Interpreter&, CallArgs& a) {
  if (a.pos.empty()) type_error("at least one item has to be provided");
  auto items = std::make_shared<std::vector<Value>>(a.pos);
  auto pos = std::make_shared<size_t>(0);
  Value obj = Value::new_dict(DictKind::Object);
  std::weak_ptr<Dict> self = obj.dict;
  auto set_current = [self, items, pos] {
    if (auto d = self.lock()) d->set(Value::string("current"), (*items)[*pos]);
  };
  obj.dict->set(Value::string("current"), (*items)[0]);
  obj.dict->set(Value::string("next"), Value::callable("next", [items, pos, set_current](Interpreter&, CallArgs&) {
    Value r = (*items)[*pos];
    *pos = (*pos + 1) % items->size();
    set_current();
    return r;
  }));
  obj.dict->set(Value::string("reset"), Value::callable("reset", [pos, set_current](Interpreter&, CallArgs&) {
    *pos = 0;
    set_current();
    return Value::none();
  }));
  return obj;
}

Value g_joiner(Interpreter&, CallArgs& a) {
  auto* s = a.get(0, "sep");
  std::string sep = s ? to_str(*s) : ", ";
  auto used = std::make_shared<bool>(false);
  return Value::callable("joiner", [sep, used](Interpreter&, CallArgs&) {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return Value::string(sep);
  });
}

Value g_raise_exception(Interpreter&, CallArgs& a) {
  auto* m = a.get(0, "message");
  throw TemplateError("TemplateError", m ? to_str(*m) : "");
}

std::tm local_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

void install_globals(Frame& frame, const RenderOptions& opts) {
  frame.vars.emplace_back("range", Value::callable("range", g_range));
  frame.vars.emplace_back("dict", Value::callable("dict", g_dict));
  frame.vars.emplace_back("namespace", Value::callable("namespace", g_namespace));
  frame.vars.emplace_back("cycler", Value::callable("cycler", g_cycler));
  frame.vars.emplace_back("joiner", Value::callable("joiner", g_joiner));
  frame.vars.emplace_back("raise_exception", Value::callable("raise_exception", g_raise_exception));
  auto clock = opts.now;
  frame.vars.emplace_back("strftime_now", Value::callable("strftime_now", [clock](Interpreter&, CallArgs& a) {
    auto* f = a.get(0, "format");
    if (!f || !f->is_string()) type_error("strftime_now() argument must be str");
    std::tm tm = clock ? clock() : local_now();
    std::string out(256, '\0');
    while (true) {
      size_t n = std::strftime(out.data(), out.size(), f->str().c_str(), &tm);
      if (n > 0 || f->str().empty() || out.size() > 65536) {
        out.resize(n);
        return Value::string(out);
      }
      out.resize(out.size() * 4);
    }
  }));
}

}  // namespace tessera::chat
