// Resource specs: parse "pool(cuda(device=0), initial_size=80%)", build the
// stack through the public create functions, describe a live stack back as a
// spec, and build the table's defaults from the environment (tether/spec.h).
#include "spec.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "tether_core/cuda.hpp"

namespace tether::capi::spec {
namespace {

constexpr std::size_t kMaxSpecLength = 4096;
// How deep resources may nest in a spec: the parser refuses deeper ones and
// tether_resource_get_spec() refuses to write them (one limit for both).
constexpr int kMaxDepth = 16;
// Messages quote at most this many bytes of a user's text (a spec, a token).
constexpr std::size_t kMaxQuoted = 200;

// ---- the types --------------------------------------------------------------

// The macros capi/src/spec_kinds.inc is written with (ci/gen_kinds.py, from
// capi/kinds.json): the table's entries name the C create function and the
// options struct, so the compiler checks every entry against the headers.
#define TETHER_SPEC_FIELD(Struct, field, kind, alias) \
  Field { #field, Kind::kind, offsetof(Struct, field), alias }

// A kind without options: create_fn(out) (leaf), create_fn(device, out), create_fn(upstream, out).
#define TETHER_SPEC_LEAF(name, create_fn)                                                                     \
  Type {                                                                                                      \
    name, Shape::Leaf, nullptr, 0, 0, nullptr,                                                                \
        [](tether_resource_t*, int, const void*, tether_resource_t** out) { return create_fn(out); }, false \
  }
#define TETHER_SPEC_DEVICE(name, create_fn)                                                                   \
  Type {                                                                                                      \
    name, Shape::Device, nullptr, 0, 0, nullptr,                                                              \
        [](tether_resource_t*, int d, const void*, tether_resource_t** out) { return create_fn(d, out); }, false \
  }
#define TETHER_SPEC_UPSTREAM(name, create_fn)                                                                 \
  Type {                                                                                                      \
    name, Shape::Upstream, nullptr, 0, 0, nullptr,                                                            \
        [](tether_resource_t* up, int, const void*, tether_resource_t** out) { return create_fn(up, out); }, false \
  }
// A kind with options that no spec sets (e.g. a handle): create_fn(device, NULL, out) or
// create_fn(upstream, NULL, out), which take the options' defaults.
#define TETHER_SPEC_DEVICE_DEFAULTS(name, create_fn)                                                          \
  Type {                                                                                                      \
    name, Shape::Device, nullptr, 0, 0, nullptr,                                                              \
        [](tether_resource_t*, int d, const void*, tether_resource_t** out) { return create_fn(d, nullptr, out); }, \
        false                                                                                                 \
  }
#define TETHER_SPEC_UPSTREAM_DEFAULTS(name, create_fn)                                                        \
  Type {                                                                                                      \
    name, Shape::Upstream, nullptr, 0, 0, nullptr,                                                            \
        [](tether_resource_t* up, int, const void*, tether_resource_t** out) {                                \
          return create_fn(up, nullptr, out);                                                                 \
        },                                                                                                    \
        false                                                                                                 \
  }
// A kind with options: create_fn(device, const Options*, out) or create_fn(upstream, const Options*, out),
// with the parameters `fields` (the Options' fields) and the defaults INIT.
#define TETHER_SPEC_DEVICE_OPTIONS(name, Options, INIT, fields, create_fn, bins)                 \
  Type {                                                                                         \
    name, Shape::Device, fields, std::size(fields), sizeof(Options),                             \
        [](void* o) {                                                                            \
          const Options init = INIT; /* INIT is a braced list: expanded here, never passed on */ \
          std::memcpy(o, &init, sizeof init);                                                    \
        },                                                                                       \
        [](tether_resource_t*, int d, const void* o, tether_resource_t** out) {                  \
          return create_fn(d, static_cast<const Options*>(o), out);                              \
        },                                                                                       \
        bins                                                                                     \
  }
#define TETHER_SPEC_UPSTREAM_OPTIONS(name, Options, INIT, fields, create_fn, bins)               \
  Type {                                                                                         \
    name, Shape::Upstream, fields, std::size(fields), sizeof(Options),                           \
        [](void* o) {                                                                            \
          const Options init = INIT; /* INIT is a braced list: expanded here, never passed on */ \
          std::memcpy(o, &init, sizeof init);                                                    \
        },                                                                                       \
        [](tether_resource_t* up, int, const void* o, tether_resource_t** out) {                 \
          return create_fn(up, static_cast<const Options*>(o), out);                             \
        },                                                                                       \
        bins                                                                                     \
  }

#include "spec_kinds.inc"

std::string known_types() {
  std::string s;
  for (const Type& t : kTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

// ---- values -------------------------------------------------------------------

// `text` in single quotes for a message: at most kMaxQuoted bytes of it (cut at
// a UTF-8 character boundary), with its length when cut.
// tether_parse_size() reads at most this many characters (SIZE_MAX has 20 digits; room for spaces and a unit).
constexpr std::size_t kMaxSizeText = 64;

std::string quoted(const std::string& text) {
  if (text.size() <= kMaxQuoted) return "'" + text + "'";
  std::size_t n = kMaxQuoted;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return "'" + text.substr(0, n) + "...' (" + std::to_string(text.size()) + " bytes)";
}

[[noreturn]] void fail_at(std::size_t pos, const std::string& what) {
  core::throw_invalid_argument("spec:" + std::to_string(pos + 1) + ": " + what);
}

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_identifier(const std::string& s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}
char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }
std::string lowercase(std::string s) {
  for (char& c : s) c = lower(c);
  return s;
}

struct Unit { const char* name; unsigned __int128 factor; };
const Unit kUnits[] = {
    {"", 1}, {"b", 1},
    {"kb", 1000ull}, {"mb", 1000000ull}, {"gb", 1000000000ull}, {"tb", 1000000000000ull}, {"pb", 1000000000000000ull},
    {"kib", 1ull << 10}, {"mib", 1ull << 20}, {"gib", 1ull << 30}, {"tib", 1ull << 40}, {"pib", 1ull << 50},
};

// A decimal number "123", "1.5", ".5" split into digits: value = mantissa / 10^scale.
struct Decimal { unsigned __int128 mantissa = 0; unsigned scale = 0; std::size_t end = 0; bool ok = false; };

Decimal read_decimal(const std::string& s) {
  Decimal d;
  std::size_t i = 0, digits = 0;
  bool dot = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (++digits > 30) return d;  // no size has 30 significant digits
      d.mantissa = d.mantissa * 10 + unsigned(c - '0');
      if (dot) ++d.scale;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  d.end = i;
  d.ok = digits > 0;
  return d;
}

unsigned __int128 pow10(unsigned n) {
  unsigned __int128 p = 1;
  while (n--) p *= 10;
  return p;
}

constexpr unsigned __int128 kSizeLimit = (unsigned __int128)1 << 64;

// A size: "4096", "64MiB", "1.5 GiB", "80%" (of `device_total()`): the one grammar of sizes, which
// specs and tether_parse_size() (so Python's parse_size) read. `fail(problem)` throws; the problem
// names the text but not the parameter.
template <class TotalOf, class Fail>
std::size_t read_size(const std::string& text, TotalOf device_total, Fail fail) {
  const Decimal d = read_decimal(text);
  if (!d.ok) fail("cannot read " + quoted(text) + " as a size (examples: 4096, 64MiB, 1.5GiB, 100MB, 80%)");
  std::string rest = text.substr(d.end);
  std::size_t k = 0;
  while (k < rest.size() && is_space(rest[k])) ++k;
  const std::string unit = rest.substr(k);
  rest = lowercase(unit);
  if (rest == "%") {
    if (d.mantissa > 100 * pow10(d.scale)) fail(quoted(text) + " is more than 100%");
    const unsigned __int128 numerator = d.mantissa * (unsigned __int128)device_total() / 100;  // floor: whole bytes
    return std::size_t(numerator / pow10(d.scale));
  }
  for (const Unit& u : kUnits) {
    if (rest != u.name) continue;
    const unsigned __int128 numerator = d.mantissa * u.factor;
    const unsigned __int128 den = pow10(d.scale);
    if (numerator % den != 0) fail(quoted(text) + " is not a whole number of bytes");
    if (numerator / den >= kSizeLimit) fail(quoted(text) + " does not fit in 64 bits");
    return std::size_t(numerator / den);
  }
  fail("unknown unit " + quoted(unit) + " in " + quoted(text) +
       " (use B, KiB, MiB, GiB, TiB, PiB, kB, MB, GB, TB, PB or %)");
  return 0;  // not reached: fail throws
}

// A size parameter of a spec: read_size's problems at the value's position, naming the parameter.
template <class TotalOf>
std::size_t parse_size(const std::string& text, std::size_t pos, const char* param, TotalOf device_total) {
  return read_size(text, device_total, [&](const std::string& problem) { fail_at(pos, std::string(param) + ": " + problem); });
}

long long parse_integer(const std::string& text, std::size_t pos, const char* param, long long lo, long long hi) {
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  if (i == text.size()) fail_at(pos, std::string(param) + ": expected an integer, got " + quoted(text));
  long long v = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9' || v > (1LL << 40))
      fail_at(pos, std::string(param) + ": expected an integer in [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "], got " + quoted(text));
    v = v * 10 + (text[i] - '0');
  }
  if (negative) v = -v;
  if (v < lo || v > hi)
    fail_at(pos, std::string(param) + ": " + quoted(text) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

bool parse_bool(const std::string& text, std::size_t pos, const char* param) {
  const std::string t = lowercase(text);
  if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "0" || t == "no" || t == "off") return false;
  fail_at(pos, std::string(param) + ": expected true or false, got " + quoted(text));
}

// A string value as the parser reads it back: in single quotes, each quote doubled.
std::string quote(const std::string& text) {
  std::string s = "'";
  for (const char c : text) {
    if (c == '\'') s.push_back(c);
    s.push_back(c);
  }
  return s + "'";
}

std::string format_size(std::uint64_t v) {
  static const struct { const char* unit; int shift; } kBinary[] = {{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}};
  for (const auto& b : kBinary)
    if (v != 0 && v % (std::uint64_t{1} << b.shift) == 0) return std::to_string(v >> b.shift) + b.unit;
  return std::to_string(v);
}

// ---- the syntax tree ----------------------------------------------------------------

struct Node;
struct Value {
  std::size_t pos = 0;
  std::string text;            // a scalar, or a resource name without arguments
  std::unique_ptr<Node> node;  // a resource with an argument list
};
struct Arg {
  std::string key;  // empty: positional
  std::size_t key_pos = 0;
  Value value;
};
struct Node {
  std::string name;
  std::size_t pos = 0;
  std::vector<Arg> args;
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  std::unique_ptr<Node> parse() {
    skip();
    if (i_ == s_.size()) fail_at(i_, "empty spec (examples: host, pool(host, initial_size=64MiB), pool(cuda()))");
    Value v = value(0);
    skip();
    if (i_ != s_.size()) fail_at(i_, "unexpected '" + std::string(1, s_[i_]) + "' after the resource");
    return as_node(std::move(v));
  }

 private:
  static std::unique_ptr<Node> as_node(Value v) {
    if (v.node) return std::move(v.node);
    if (!is_identifier(v.text)) fail_at(v.pos, "expected a resource name, got " + quoted(v.text));
    auto n = std::make_unique<Node>();
    n->name = v.text;
    n->pos = v.pos;
    return n;
  }
  void skip() {
    while (i_ < s_.size() && is_space(s_[i_])) ++i_;
  }
  // A run of value characters (anything but , ( ) = and quotes), trimmed; or a
  // string in double or single quotes, where the quote doubled stands for
  // itself ('it''s': what the spec writer writes for a quote in a path).
  std::string run(std::size_t& start) {
    skip();
    start = i_;
    if (i_ < s_.size() && (s_[i_] == '"' || s_[i_] == '\'')) {
      const char q = s_[i_];
      std::string t;
      std::size_t from = i_ + 1;
      for (;;) {
        const std::size_t close = s_.find(q, from);
        if (close == std::string::npos) fail_at(start, "unterminated quote");
        t.append(s_, from, close - from);
        if (close + 1 < s_.size() && s_[close + 1] == q) {
          t.push_back(q);
          from = close + 2;
          continue;
        }
        i_ = close + 1;
        return t;
      }
    }
    while (i_ < s_.size() && std::strchr(",()=\"'", s_[i_]) == nullptr) ++i_;
    std::size_t end = i_;
    while (end > start && is_space(s_[end - 1])) --end;
    return s_.substr(start, end - start);
  }
  Value value(int depth) {
    Value v;
    v.text = run(v.pos);
    skip();
    if (i_ < s_.size() && s_[i_] == '(') {
      if (!is_identifier(v.text))
        fail_at(v.pos, v.text.empty() ? "expected a resource name before '('" : quoted(v.text) + " is not a resource name");
      if (depth >= kMaxDepth) fail_at(v.pos, "resources nested more than " + std::to_string(kMaxDepth) + " deep");
      auto n = std::make_unique<Node>();
      n->name = v.text;
      n->pos = v.pos;
      ++i_;  // (
      skip();
      if (i_ < s_.size() && s_[i_] == ')') {
        ++i_;
      } else {
        for (;;) {
          n->args.push_back(argument(depth + 1));
          skip();
          if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
          if (i_ < s_.size() && s_[i_] == ')') { ++i_; break; }
          fail_at(i_, i_ == s_.size() ? "missing ')' closing " + n->name + "(" : "expected ',' or ')' in the arguments of " + n->name);
        }
      }
      v.node = std::move(n);
      v.text.clear();
    } else if (v.text.empty()) {
      fail_at(v.pos, i_ == s_.size() ? "unexpected end of the spec (a value is missing)"
                                      : "expected a value, got '" + std::string(1, s_[i_]) + "'");
    }
    return v;
  }
  Arg argument(int depth) {
    Arg a;
    const std::size_t save = i_;
    std::size_t start;
    std::string key = run(start);
    skip();
    if (i_ < s_.size() && s_[i_] == '=') {
      if (!is_identifier(key)) fail_at(start, quoted(key) + " is not a parameter name");
      ++i_;
      a.key = key;
      a.key_pos = start;
      a.value = value(depth);
      return a;
    }
    i_ = save;
    a.value = value(depth);
    return a;
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

// ---- building -------------------------------------------------------------------------

struct Context {
  int device;  // the device of CUDA resources that name none
};

std::size_t device_total_memory(int device) {
  std::size_t free_bytes = 0, total_bytes = 0;
  core::cuda::memory_info(device, &free_bytes, &total_bytes);
  return total_bytes;
}

[[noreturn]] void fail_from_c(tether_status_t status, std::size_t pos, const std::string& what) {
  throw core::Error(status, "spec:" + std::to_string(pos + 1) + ": " + what + ": " + tether_last_error_message());
}

HandleRef build(const Node& n, const Context& ctx);

HandleRef build_value(const Value& v, const Context& ctx) {
  if (v.node) return build(*v.node, ctx);
  if (!is_identifier(v.text)) fail_at(v.pos, "expected a resource, got " + quoted(v.text));
  Node leaf;
  leaf.name = v.text;
  leaf.pos = v.pos;
  return build(leaf, ctx);
}

// The one parameter that is no options field: the bins of a binning resource,
// added after creation as tether_binning_resource_add_bin(r, size, NULL) does.
// Its value is a quoted list of sizes: bins='4KiB,64KiB'.
constexpr const char* kBinsParam = "bins";
bool takes_bins(const Type& t) { return t.bins; }

std::string param_list(const Type& t) {
  std::string s = t.shape == Shape::Upstream ? "upstream" : t.shape == Shape::Device ? "device" : "";
  for (std::size_t i = 0; i < t.field_count; ++i) s += (s.empty() ? "" : ", ") + std::string(t.fields[i].name);
  if (takes_bins(t)) s += std::string(", ") + kBinsParam;
  return s.empty() ? "none" : s;
}

HandleRef build(const Node& n, const Context& ctx) {
  const Type* t = find_type(n.name);
  if (t == nullptr) fail_at(n.pos, "unknown resource " + quoted(n.name) + " (known: " + known_types() + ")");
  alignas(std::max_align_t) unsigned char options[256] = {};
  if (t->options_size > sizeof options) fail_at(n.pos, "internal: options of " + n.name + " too large");
  if (t->options_size != 0) t->defaults(options);

  const Value* upstream = nullptr;
  const Arg* device_arg = nullptr;
  const Arg* bins_arg = nullptr;
  std::vector<const Field*> seen;
  std::vector<std::pair<const Field*, const Arg*>> sets;
  bool device_seen = false, upstream_seen = false;
  for (std::size_t i = 0; i < n.args.size(); ++i) {
    const Arg& a = n.args[i];
    if (a.key.empty()) {
      if (i != 0) fail_at(a.value.pos, "only the first argument of " + n.name + " may be positional; name this one");
      if (t->shape == Shape::Leaf) fail_at(a.value.pos, n.name + " takes no positional argument");
    }
    const bool is_upstream = t->shape == Shape::Upstream && (a.key.empty() || a.key == "upstream" || a.key == "upstream_mr");
    const bool is_device = t->shape == Shape::Device && (a.key.empty() || a.key == "device");
    if (is_upstream) {
      if (upstream_seen) fail_at(a.key_pos, "upstream of " + n.name + " given twice");
      upstream_seen = true;
      upstream = &a.value;
      continue;
    }
    if (is_device) {
      if (device_seen) fail_at(a.key_pos, "device of " + n.name + " given twice");
      device_seen = true;
      device_arg = &a;
      continue;
    }
    if (takes_bins(*t) && a.key == kBinsParam) {
      if (bins_arg != nullptr) fail_at(a.key_pos, std::string("parameter 'bins' of ") + n.name + " given twice");
      if (a.value.node) fail_at(a.value.pos, "parameter 'bins' of " + n.name + " takes sizes, not a resource");
      bins_arg = &a;
      continue;
    }
    const Field* f = nullptr;
    for (std::size_t k = 0; k < t->field_count; ++k)
      if (a.key == t->fields[k].name || (t->fields[k].alias && a.key == t->fields[k].alias)) f = &t->fields[k];
    if (f == nullptr)
      fail_at(a.key_pos, "unknown parameter " + quoted(a.key) + " of " + n.name + " (parameters: " + param_list(*t) + ")");
    for (const Field* s : seen)
      if (s == f) fail_at(a.key_pos, "parameter '" + std::string(f->name) + "' of " + n.name + " given twice");
    seen.push_back(f);
    if (a.value.node && f->kind != Kind::Resource)
      fail_at(a.value.pos, "parameter '" + std::string(f->name) + "' of " + n.name + " takes a value, not a resource");
    sets.emplace_back(f, &a);
  }
  if (t->shape == Shape::Upstream && upstream == nullptr)
    fail_at(n.pos, n.name + " needs an upstream, e.g. " + n.name + "(host) or " + n.name + "(cuda())");

  HandleRef up;
  std::vector<HandleRef> nested;  // resources given as parameters: alive until the create call returns
  int device = ctx.device;
  if (upstream != nullptr) up = build_value(*upstream, ctx);
  if (device_arg != nullptr) {
    if (device_arg->value.node) fail_at(device_arg->value.pos, "device of " + n.name + " must be an integer");
    device = int(parse_integer(device_arg->value.text, device_arg->value.pos, "device", 0, 1 << 20));
  }
  // The device whose total memory a percentage refers to.
  auto total_for = [&](const Arg* a, const char* param) -> std::size_t {
    int d = device;
    if (up) {
      tether_resource_properties_t p = TETHER_RESOURCE_PROPERTIES_INIT;
      if (tether_resource_get_properties(up.get(), &p) != TETHER_OK) fail_from_c(TETHER_ERROR_INTERNAL, a->value.pos, param);
      if (p.device < 0)
        fail_at(a->value.pos, std::string(param) + ": a percentage needs device memory, and the upstream of " + n.name +
                                  " gives host memory");
      d = p.device;
    } else if (t->shape != Shape::Device) {
      fail_at(a->value.pos, std::string(param) + ": a percentage needs a device resource");
    }
    if (d == TETHER_DEVICE_CURRENT) d = core::cuda::current_device();
    try {
      return device_total_memory(d);
    } catch (const core::Error& e) {
      throw core::Error(e.status(), "spec:" + std::to_string(a->value.pos + 1) + ": " + param + ": " + e.what());
    }
  };
  for (const auto& set : sets) {
    const Field* f = set.first;  // plain names: lambdas may not capture structured bindings (C++17)
    const Arg* a = set.second;
    unsigned char* field = options + f->offset;
    switch (f->kind) {
      case Kind::Size: {
        const std::size_t v = parse_size(a->value.text, a->value.pos, f->name, [&] { return total_for(a, f->name); });
        std::memcpy(field, &v, sizeof v);
        break;
      }
      case Kind::Count: {
        const auto v = std::size_t(parse_integer(a->value.text, a->value.pos, f->name, 0, 1LL << 40));
        std::memcpy(field, &v, sizeof v);
        break;
      }
      case Kind::String: {
        const char* text = a->value.text.c_str();  // the AST outlives the create call, which copies it
        std::memcpy(field, &text, sizeof text);
        break;
      }
      case Kind::Resource: {
        nested.push_back(build_value(a->value, ctx));
        tether_resource_t* h = nested.back().get();
        std::memcpy(field, &h, sizeof h);
        break;
      }
      case Kind::U32: {
        const auto v = std::uint32_t(parse_integer(a->value.text, a->value.pos, f->name, 0, 0xffffffffLL));
        std::memcpy(field, &v, sizeof v);
        break;
      }
      case Kind::I32: {
        const auto v = std::int32_t(parse_integer(a->value.text, a->value.pos, f->name, -0x80000000LL, 0x7fffffffLL));
        std::memcpy(field, &v, sizeof v);
        break;
      }
      case Kind::Bool: {
        const std::int32_t v = parse_bool(a->value.text, a->value.pos, f->name) ? 1 : 0;
        std::memcpy(field, &v, sizeof v);
        break;
      }
    }
  }
  std::vector<std::size_t> bins;
  if (bins_arg != nullptr) {
    const std::string& list = bins_arg->value.text;
    for (std::size_t from = 0; from <= list.size();) {
      std::size_t comma = list.find(',', from);
      if (comma == std::string::npos) comma = list.size();
      std::size_t b = from, e = comma;
      while (b < e && is_space(list[b])) ++b;
      while (e > b && is_space(list[e - 1])) --e;
      if (b == e) fail_at(bins_arg->value.pos, "bins: expected sizes separated by commas, got " + quoted(list));
      bins.push_back(parse_size(list.substr(b, e - b), bins_arg->value.pos, kBinsParam,
                                [&] { return total_for(bins_arg, kBinsParam); }));
      from = comma + 1;
    }
  }
  tether_resource_t* out = nullptr;
  const tether_status_t st = t->create(up.get(), device, t->options_size ? options : nullptr, &out);
  if (st != TETHER_OK) fail_from_c(st, n.pos, "cannot create " + n.name);
  HandleRef made = HandleRef::adopt(out);
  for (const std::size_t size : bins) {
    const tether_status_t added = tether_binning_resource_add_bin(out, size, nullptr);
    if (added != TETHER_OK) fail_from_c(added, bins_arg->value.pos, "bins: cannot add a bin of " + format_size(size));
  }
  return made;
}

HandleRef build_spec(const char* spec, const Context& ctx) {
  if (spec == nullptr) core::throw_invalid_argument("spec must not be NULL");
  const std::size_t len = strnlen(spec, kMaxSpecLength + 1);
  if (len > kMaxSpecLength)
    core::throw_invalid_argument("spec is longer than " + std::to_string(kMaxSpecLength) + " bytes");
  const std::string text(spec, len);
  return build(*Parser(text).parse(), ctx);
}

// ---- describing ---------------------------------------------------------------------------

}  // namespace

std::string describe(tether_resource_t* h, int depth) {
  ResourceRef r(h);
  if (depth > kMaxDepth)
    throw core::Error(TETHER_ERROR_NOT_SUPPORTED, "the resource stack is nested more than " +
                                                      std::to_string(kMaxDepth) + " deep: no spec can name it");
  const char* name = r->core->name();
  if (find_type(name) == nullptr)
    throw core::Error(TETHER_ERROR_NOT_SUPPORTED,
                      std::string("a ") + name + " resource cannot be named in a spec (it is made of functions)");
  std::string spec_args, refusal;
  std::vector<std::size_t> bins;
  {
    std::lock_guard<std::mutex> lock(r->spec_mutex);
    spec_args = r->spec_args;
    refusal = r->spec_refusal;
    bins = r->spec_bins;
  }
  if (!refusal.empty()) throw core::Error(TETHER_ERROR_NOT_SUPPORTED, refusal);
  std::string s = name;
  std::string args;
  if (r->upstream != nullptr) args = describe(r->upstream, depth + 1);
  if (!spec_args.empty()) args += (args.empty() ? "" : ", ") + spec_args;
  if (!bins.empty()) {
    std::string list;
    for (const std::size_t b : bins) list += (list.empty() ? "" : ",") + format_size(b);
    args += (args.empty() ? "" : ", ") + std::string(kBinsParam) + "='" + list + "'";
  }
  if (!args.empty()) s += "(" + args + ")";
  return s;
}

// A spec as tether_resource_get_spec() may hand it out: one that
// tether_resource_create_from_spec() reads back (no longer than it takes,
// valid UTF-8 so every frontend can hold it as text, within the nesting
// limit). Throws NOT_SUPPORTED saying why not.
void check_writable(const std::string& spec) {
  if (spec.size() > kMaxSpecLength)
    throw core::Error(TETHER_ERROR_NOT_SUPPORTED, "the spec would be " + std::to_string(spec.size()) +
                                                      " bytes, longer than a spec may be (" +
                                                      std::to_string(kMaxSpecLength) + ")");
  for (std::size_t i = 0; i < spec.size();) {
    const unsigned char c = static_cast<unsigned char>(spec[i]);
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len != 0 && i + len <= spec.size() && !(len == 2 && c < 0xC2);
    for (std::size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(spec[i + k]) & 0xC0) == 0x80;
    if (ok && len == 3) {  // no overlong forms, no surrogates
      const unsigned char c1 = static_cast<unsigned char>(spec[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && len == 4) {
      const unsigned char c1 = static_cast<unsigned char>(spec[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90) && c <= 0xF4;
    }
    if (!ok)
      throw core::Error(TETHER_ERROR_NOT_SUPPORTED, "the spec is not valid UTF-8 at byte " + std::to_string(i + 1) +
                                                        " (a log path?): a spec must be text");
    i += len;
  }
  try {
    Parser(spec).parse();
  } catch (const core::Error& e) {
    throw core::Error(TETHER_ERROR_NOT_SUPPORTED, std::string("the spec would not parse back: ") + e.what());
  }
}

const Type* find_type(const std::string& name) noexcept {
  for (const Type& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

std::string format_options(const Type& type, const void* options, std::string* refusal) {
  if (type.options_size == 0 || options == nullptr) return {};
  alignas(std::max_align_t) unsigned char defaults[256] = {};
  type.defaults(defaults);
  std::string s;
  const auto* o = static_cast<const unsigned char*>(options);
  for (std::size_t k = 0; k < type.field_count; ++k) {
    const Field& f = type.fields[k];
    std::string v;
    switch (f.kind) {
      case Kind::Size: {
        std::size_t a, b;
        std::memcpy(&a, o + f.offset, sizeof a);
        std::memcpy(&b, defaults + f.offset, sizeof b);
        if (a != b) v = format_size(a);
        break;
      }
      case Kind::Count: {
        std::size_t a, b;
        std::memcpy(&a, o + f.offset, sizeof a);
        std::memcpy(&b, defaults + f.offset, sizeof b);
        if (a != b) v = std::to_string(a);
        break;
      }
      case Kind::Resource: {
        tether_resource_t* h = nullptr;
        std::memcpy(&h, o + f.offset, sizeof h);
        if (h != nullptr) {
          try {
            v = describe(h, 1);
          } catch (const core::Error& e) {  // the resource is made; only its spec is refused
            if (refusal != nullptr) *refusal = std::string(type.name) + " " + f.name + ": " + e.what();
          }
        }
        break;
      }
      case Kind::String: {
        const char* text = nullptr;
        std::memcpy(&text, o + f.offset, sizeof text);
        if (text != nullptr) v = quote(text);
        break;
      }
      case Kind::U32: {
        std::uint32_t a, b;
        std::memcpy(&a, o + f.offset, sizeof a);
        std::memcpy(&b, defaults + f.offset, sizeof b);
        if (a != b) v = std::to_string(a);
        break;
      }
      case Kind::I32:
      case Kind::Bool: {
        std::int32_t a, b;
        std::memcpy(&a, o + f.offset, sizeof a);
        std::memcpy(&b, defaults + f.offset, sizeof b);
        if (f.kind == Kind::Bool) {
          if ((a != 0) != (b != 0)) v = a ? "true" : "false";
        } else if (a != b) {
          v = std::to_string(a);
        }
        break;
      }
    }
    if (!v.empty()) s += (s.empty() ? "" : ", ") + std::string(f.name) + "=" + v;
  }
  return s;
}

std::string format_options(const char* type_name, const void* options, std::string* refusal) {
  const Type* t = find_type(type_name);
  // A name outside the table is a bug in the glue: failing here beats a spec that
  // silently loses the resource's parameters.
  if (t == nullptr)
    throw core::Error(TETHER_ERROR_INTERNAL, std::string("no spec kind is named '") + type_name +
                                                 "' (capi/kinds.json lists the kinds a spec can name)");
  return format_options(*t, options, refusal);
}

HandleRef default_from_environment(int slot) {
  std::string name = slot < 0 ? "TETHER_RESOURCE_HOST" : "TETHER_RESOURCE_" + std::to_string(slot);
  // Empty or blank counts as unset (docs/specs.rst).
  const auto unset = [](const char* v) {
    if (v == nullptr) return true;
    while (is_space(*v)) ++v;
    return *v == '\0';
  };
  const char* value = std::getenv(name.c_str());
  if (unset(value) && slot >= 0) {
    name = "TETHER_RESOURCE";
    value = std::getenv(name.c_str());
  }
  if (unset(value)) return {};
  try {
    Context ctx{slot < 0 ? TETHER_DEVICE_CURRENT : slot};
    HandleRef r = build_spec(value, ctx);
    ResourceRef ref(r.get());
    check_usable(ref->core->properties(), slot);
    return r;
  } catch (const core::Error& e) {
    const std::string where = slot < 0 ? "the host slot" : "device " + std::to_string(slot) + "'s slot";
    const std::string message = name + "=" + quoted(value) + " (the default of " + where + "): " + e.what() +
                                "; every get of this slot fails until the variable is fixed or a resource is set";
    static std::atomic<std::uint64_t> reported{0};  // one bit per slot (host: bit 63)
    const std::uint64_t bit = std::uint64_t{1} << (slot < 0 ? 63 : slot % 63);
    if ((reported.fetch_or(bit) & bit) == 0) std::fprintf(stderr, "tether: %s\n", message.c_str());
    throw core::Error(e.status(), message);
  }
}

// tether_parse_size(): one size as a caller writes it, ASCII white space around it ignored; a
// percentage of `device`'s total memory (TETHER_DEVICE_CURRENT: the calling thread's device).
std::size_t parse_size_text(const char* text, int device) {
  if (text == nullptr) core::throw_invalid_argument("text must not be NULL");
  const std::size_t length = strnlen(text, kMaxSizeText + 1);
  if (length > kMaxSizeText)
    core::throw_invalid_argument("a size string of more than " + std::to_string(kMaxSizeText) +
                                 " characters is too long to be a size (examples: 4096, 64MiB, 1.5GiB, 80%)");
  std::size_t b = 0, e = length;
  while (b < e && is_space(text[b])) ++b;
  while (e > b && is_space(text[e - 1])) --e;
  const std::string s(text + b, e - b);
  auto total = [&]() -> std::size_t {
    if (device == TETHER_DEVICE_HOST)
      core::throw_invalid_argument(quoted(s) + " is a share of a device's memory, and this size has no device (host memory, or none given)");
    return device_total_memory(device == TETHER_DEVICE_CURRENT ? core::cuda::current_device() : device);
  };
  return read_size(s, total, [](const std::string& problem) { core::throw_invalid_argument(problem); });
}

}  // namespace tether::capi::spec

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_resource_create_from_spec(const char* spec, tether_resource_t** out) {
  return guard("tether_resource_create_from_spec", [&] {
    require_out(out);
    *out = nullptr;
    *out = spec::build_spec(spec, spec::Context{TETHER_DEVICE_CURRENT}).release();
  });
}

TETHER_API tether_status_t tether_resource_get_spec(tether_resource_t* resource, char* buffer, size_t capacity,
                                                    size_t* out_length) {
  return guard("tether_resource_get_spec", [&] {
    require_out(out_length, "out_length");
    const std::string s = spec::describe(resource, 0);
    spec::check_writable(s);
    *out_length = s.size();
    if (buffer == nullptr && capacity == 0) return;
    if (buffer == nullptr) core::throw_invalid_argument("buffer is NULL but capacity is not 0");
    if (capacity <= s.size())
      core::throw_invalid_argument("capacity " + std::to_string(capacity) + " is too small: the spec needs " +
                                   std::to_string(s.size() + 1) + " bytes with its NUL");
    std::memcpy(buffer, s.c_str(), s.size() + 1);
  });
}

TETHER_API tether_status_t tether_parse_size(const char* text, int device, size_t* out) {
  return guard("tether_parse_size", [&] {
    require_out(out);
    *out = 0;
    *out = spec::parse_size_text(text, device);
  });
}

}  // extern "C"
