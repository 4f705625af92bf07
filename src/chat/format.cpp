// Python's two string formatting mini-languages: `fmt % args` (and the |format filter) and
// str.format(*args, **kwargs).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/builtins.h"
#include "chat/error.h"
#include "chat/text.h"

namespace tessera::chat {

namespace {

struct Spec {
  std::string flags;
  int width = -1, precision = -1;
};

std::string pad(std::string s, const Spec& sp, bool left) {
  auto len = static_cast<int>(text::length(s));
  if (sp.width > len) {
    std::string fill(static_cast<size_t>(sp.width - len), ' ');
    s = left ? s + fill : fill + s;
  }
  return s;
}

std::string c_format(const Spec& sp, char conv, bool is_float, int64_t i, double d) {
  std::string f = "%";
  f += sp.flags;
  if (sp.width >= 0) f += std::to_string(sp.width);
  if (sp.precision >= 0) {
    f += '.';
    f += std::to_string(sp.precision);
  }
  f += is_float ? std::string(1, conv) : std::string("ll") + conv;
  char buf[512];
  if (is_float)
    std::snprintf(buf, sizeof buf, f.c_str(), d);
  else
    std::snprintf(buf, sizeof buf, f.c_str(), static_cast<long long>(i));
  return buf;
}

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args, bool escape) {
  std::vector<Value> pos;
  const Value* mapping = args.is_mapping() ? &args : nullptr;
  if (args.is_list() && args.list->kind == ListKind::Tuple)
    pos = args.list->items;
  else
    pos.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw TemplateError("ValueError", "incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    const Value* v = nullptr;
    if (fmt[i] == '(') {
      auto close = fmt.find(')', i);
      if (close == std::string::npos) throw TemplateError("ValueError", "incomplete format key");
      if (!mapping) type_error("format requires a mapping");
      v = mapping->dict->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!v) throw TemplateError("KeyError", text::repr(fmt.substr(i + 1, close - i - 1)));
      i = close + 1;
    }
    Spec sp;
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) sp.flags += fmt[i++];
    auto number = [&](int& dst) {
      if (i < fmt.size() && fmt[i] == '*') {
        if (next >= pos.size()) type_error("not enough arguments for format string");
        dst = static_cast<int>(to_int(pos[next++], "*"));
        ++i;
        return;
      }
      if (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') dst = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') dst = std::min(dst * 10 + (fmt[i++] - '0'), 10000);
    };
    number(sp.width);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      sp.precision = 0;
      number(sp.precision);
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) throw TemplateError("ValueError", "incomplete format");
    char conv = fmt[i];
    if (!v) {
      if (next >= pos.size()) type_error("not enough arguments for format string");
      v = &pos[next++];
    }
    bool left = sp.flags.find('-') != std::string::npos;
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = conv == 's' ? to_str(*v) : repr(*v);
        if (escape && !(v->is_string() && v->markup)) s = text::html_escape(s);
        if (sp.precision >= 0) s = text::from_u32(text::to_u32(s).substr(0, static_cast<size_t>(sp.precision)));
        out += pad(s, sp, left);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!v->is_number()) type_error(std::string("%") + conv + " format: a real number is required, not " + type_name(*v));
        if ((conv == 'x' || conv == 'X' || conv == 'o') && v->kind == Kind::Float)
          type_error(std::string("%") + conv + " format: an integer is required, not float");
        int64_t n = v->kind == Kind::Float ? static_cast<int64_t>(v->f) : v->kind == Kind::Int ? v->i : v->b;
        out += c_format(sp, conv == 'i' || conv == 'u' ? 'd' : conv, false, n, 0);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!v->is_number()) type_error(std::string("must be real number, not ") + type_name(*v));
        out += c_format(sp, conv, true, 0, v->as_double());
        break;
      case 'c':
        if (v->is_string() && text::length(v->str()) == 1)
          out += pad(v->str(), sp, left);
        else if (v->kind == Kind::Int) {
          std::string ch;
          text::encode(static_cast<char32_t>(v->i), ch);
          out += pad(ch, sp, left);
        } else {
          type_error("%c requires int or char");
        }
        break;
      default:
        throw TemplateError("ValueError", std::string("unsupported format character '") + conv + "'");
    }
  }
  // Python skips this check for arguments with __getitem__ (lists, dicts, Undefined).
  bool subscriptable = args.is_mapping() || args.is_undefined() || (args.is_list() && args.list->kind == ListKind::List);
  if (!subscriptable && next < pos.size()) type_error("not all arguments converted during string formatting");
  return out;
}

namespace {

std::string format_spec(const Value& v, const std::string& spec) {
  size_t i = 0;
  char fill = ' ', align = 0, sign = '-';
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (spec.size() >= 2 && is_align(spec[1])) {
    fill = spec[0];
    align = spec[1];
    i = 2;
  } else if (!spec.empty() && is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  bool alt = false;
  if (i < spec.size() && spec[i] == '#') alt = true, ++i;
  if (i < spec.size() && spec[i] == '0') {
    if (!align) fill = '0', align = '=';
    ++i;
  }
  int width = 0;
  while (i < spec.size() && isdigit(static_cast<unsigned char>(spec[i]))) width = std::min(width * 10 + (spec[i++] - '0'), 1 << 26);
  char group = 0;
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) group = spec[i++];
  int prec = -1;
  if (i < spec.size() && spec[i] == '.') {
    prec = 0;
    ++i;
    while (i < spec.size() && isdigit(static_cast<unsigned char>(spec[i]))) prec = std::min(prec * 10 + (spec[i++] - '0'), 1000);
  }
  char type = i < spec.size() ? spec[i++] : 0;
  if (i != spec.size()) throw TemplateError("ValueError", "Invalid format specifier '" + spec + "'");

  std::string body, prefix;
  bool numeric = v.is_number() && type != 's';
  if (!numeric) {
    if (type && type != 's') throw TemplateError("ValueError", std::string("Unknown format code '") + type + "' for object of type '" + type_name(v) + "'");
    body = to_str(v);
    if (prec >= 0) body = text::from_u32(text::to_u32(body).substr(0, static_cast<size_t>(prec)));
    if (!align) align = '<';
  } else {
    bool is_int = v.kind != Kind::Float && (type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' ||
                                            type == 'b' || type == 'n' || type == 'c');
    double d = v.as_double();
    bool neg = is_int ? (v.kind == Kind::Int ? v.i < 0 : false) : std::signbit(d);
    char buf[512];
    if (is_int) {
      uint64_t mag = v.kind == Kind::Int ? (v.i < 0 ? 0 - static_cast<uint64_t>(v.i) : static_cast<uint64_t>(v.i))
                                         : static_cast<uint64_t>(v.b);
      if (type == 'x' || type == 'X') std::snprintf(buf, sizeof buf, type == 'x' ? "%llx" : "%llX", static_cast<unsigned long long>(mag));
      else if (type == 'o') std::snprintf(buf, sizeof buf, "%llo", static_cast<unsigned long long>(mag));
      else if (type == 'b') {
        std::string b;
        for (uint64_t m = mag; m; m >>= 1) b.insert(b.begin(), static_cast<char>('0' + (m & 1)));
        std::snprintf(buf, sizeof buf, "%s", b.empty() ? "0" : b.c_str());
      } else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(mag));
      body = buf;
      if (alt && (type == 'x' || type == 'X' || type == 'o' || type == 'b')) prefix = std::string("0") + type;
    } else {
      double m = std::fabs(d);
      if (type == 0 && prec < 0) {
        body = text::float_repr(m);
      } else if (type == '%') {
        std::snprintf(buf, sizeof buf, "%.*f%%", prec < 0 ? 6 : prec, m * 100);
        body = buf;
      } else {
        char t = type == 0 ? 'g' : type == 'n' ? 'g' : type;
        std::string f = std::string("%") + (alt ? "#" : "") + ".*" + t;
        std::snprintf(buf, sizeof buf, f.c_str(), prec < 0 ? 6 : prec, m);
        body = buf;
      }
    }
    if (group) {
      size_t end = body.find_first_not_of("0123456789");
      if (end == std::string::npos) end = body.size();
      for (int k = static_cast<int>(end) - 3; k > 0; k -= 3) body.insert(static_cast<size_t>(k), 1, group);
    }
    prefix = (neg ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "") + prefix;
    if (!align) align = '>';
  }
  auto len = static_cast<int>(text::length(prefix) + text::length(body));
  if (width <= len) return prefix + body;
  std::string padding(static_cast<size_t>(width - len), fill);
  switch (align) {
    case '<': return prefix + body + padding;
    case '>': return padding + prefix + body;
    case '=': return prefix + padding + body;
    default: {
      size_t l = padding.size() / 2;
      return padding.substr(0, l) + prefix + body + padding.substr(l);
    }
  }
}

}  // namespace

std::string str_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw TemplateError("ValueError", "Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw TemplateError("ValueError", "Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conv;
    if (auto colon = field.find(':'); colon != std::string::npos) spec = field.substr(colon + 1), field.resize(colon);
    if (auto bang = field.find('!'); bang != std::string::npos) conv = field.substr(bang + 1), field.resize(bang);
    size_t acc = field.find_first_of(".[");
    std::string name = field.substr(0, acc);
    Value v;
    if (name.empty() || std::all_of(name.begin(), name.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      size_t idx = name.empty() ? auto_index++ : name.size() < 9 ? std::stoul(name) : SIZE_MAX;
      if (idx >= args.pos.size())
        throw TemplateError("IndexError", "Replacement index " + std::to_string(idx) + " out of range for positional args tuple");
      v = args.pos[idx];
    } else {
      auto* kw = args.kwarg(name);
      if (!kw) throw TemplateError("KeyError", text::repr(name));
      v = *kw;
    }
    while (acc != std::string::npos && acc < field.size()) {
      size_t end;
      std::string key;
      if (field[acc] == '.') {
        end = field.find_first_of(".[", acc + 1);
        key = field.substr(acc + 1, end == std::string::npos ? std::string::npos : end - acc - 1);
      } else {
        end = field.find(']', acc);
        if (end == std::string::npos) throw TemplateError("ValueError", "Missing ']' in format string");
        key = field.substr(acc + 1, end - acc - 1);
        ++end;
      }
      const Value* found = v.is_dict() ? v.dict->find(key) : nullptr;
      if (!found) throw TemplateError("KeyError", text::repr(key));
      v = *found;
      acc = end;
    }
    if (conv == "r") v = Value::string(repr(v));
    else if (conv == "s") v = Value::string(to_str(v));
    out += format_spec(v, spec);
  }
  return out;
}

}  // namespace tessera::chat
