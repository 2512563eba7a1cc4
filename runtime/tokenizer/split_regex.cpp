#include "runtime/tokenizer/split_regex.h"

#include <bit>
#include <limits>

#include "runtime/core/status_macros.h"
#include "runtime/tokenizer/unicode_class.h"
#include "runtime/tokenizer/utf8.h"

namespace layerstream {
namespace {

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

struct CharRange {
  uint32_t lo = 0, hi = 0;
};

// A set of code points: ranges (on Unit::cp) and property flags.
struct CharClass {
  std::vector<CharRange> ranges;
  uint16_t flags = 0;
  bool negated = false;

  bool test(const Unit& u) const {
    bool in = (u.flags & flags) != 0;
    for (size_t i = 0; !in && i < ranges.size(); ++i) in = u.cp >= ranges[i].lo && u.cp <= ranges[i].hi;
    return in != negated;
  }
};

enum class Kind { kClass, kSeq, kAlt, kRepeat, kLook, kEnd };

struct Node {
  Kind kind = Kind::kClass;
  CharClass cls;               // kClass
  std::vector<int> kids;       // kSeq, kAlt; kRepeat and kLook: one
  uint32_t min = 1, max = 1;   // kRepeat
  bool greedy = true;          // kRepeat
  bool negate = false;         // kLook: (?! )
  // Filled after parsing: this node always consumes exactly one unit, and
  // these are its tests (each class must give `want`).
  struct Test {
    const CharClass* cls;
    bool want;
  };
  std::vector<Test> single;
  // What the first unit of a match can be: one of these single-unit nodes,
  // or anything (also when the node can match nothing at all).
  bool starts_anywhere = false;
  std::vector<int> starts;
  // kAlt with at most 64 alternatives: for each ASCII unit, the bit set of
  // the alternatives that may start with it (a unit below 128 is fully
  // described by its code point).
  std::vector<uint64_t> ascii_kids;
};

Node make_node(Kind k) {
  Node n;
  n.kind = k;
  return n;
}

// A continuation: what must match after a node, given where the node ended.
struct Cont {
  bool (*fn)(const void*, size_t);
  const void* ctx;
  bool operator()(size_t p) const { return fn(ctx, p); }
};
template <typename F>
Cont cont(const F& f) {
  return {[](const void* c, size_t p) { return (*static_cast<const F*>(c))(p); }, &f};
}

}  // namespace

struct SplitRegex::Program {
  std::string pattern;
  std::vector<Node> nodes;
  int root = -1;
};

namespace {

// Recursive-descent parser over the pattern's code points.
class Parser {
 public:
  Parser(std::string_view pattern, SplitRegex::Program& p) : prog_(p) {
    for (size_t pos = 0; pos < pattern.size();) {
      utf8::ScanResult r = utf8::scan(pattern, pos);
      cps_.push_back(r.kind == utf8::Scan::kValid ? r.cp : static_cast<uint8_t>(pattern[pos]));
      pos += r.kind == utf8::Scan::kValid ? r.len : 1;
    }
  }

  Status run() {
    int root = -1;
    LS_RETURN_IF_ERROR(alternation(&root));
    if (i_ != cps_.size()) return error("unbalanced ')'");
    prog_.root = root;
    return Status::OK();
  }

 private:
  Status error(const std::string& what) const {
    return Status::InvalidArgument("pre-tokenizer pattern '" + prog_.pattern + "': " + what + " at code point " +
                                   std::to_string(i_));
  }
  bool more() const { return i_ < cps_.size(); }
  uint32_t peek(size_t ahead = 0) const { return i_ + ahead < cps_.size() ? cps_[i_ + ahead] : 0; }
  int add(Node n) {
    prog_.nodes.push_back(std::move(n));
    return static_cast<int>(prog_.nodes.size()) - 1;
  }

  Status alternation(int* out) {
    std::vector<int> alts;
    for (;;) {
      int s = -1;
      LS_RETURN_IF_ERROR(sequence(&s));
      alts.push_back(s);
      if (!more() || peek() != '|') break;
      ++i_;
    }
    if (alts.size() == 1) {
      *out = alts[0];
    } else {
      Node n = make_node(Kind::kAlt);
      n.kids = std::move(alts);
      *out = add(std::move(n));
    }
    return Status::OK();
  }

  Status sequence(int* out) {
    Node seq = make_node(Kind::kSeq);
    while (more() && peek() != '|' && peek() != ')') {
      int atom_id = -1;
      LS_RETURN_IF_ERROR(atom(&atom_id));
      LS_RETURN_IF_ERROR(quantifier(&atom_id));
      seq.kids.push_back(atom_id);
    }
    *out = seq.kids.size() == 1 ? seq.kids[0] : add(std::move(seq));
    return Status::OK();
  }

  Status atom(int* out) {
    const uint32_t c = cps_[i_++];
    if (c == '(') return group(out);
    if (c == '$') {
      *out = add(make_node(Kind::kEnd));
      return Status::OK();
    }
    Node n = make_node(Kind::kClass);
    if (c == '[') {
      LS_RETURN_IF_ERROR(bracket(&n.cls));
    } else if (c == '\\') {
      LS_RETURN_IF_ERROR(escape(&n.cls, /*in_class=*/false));
    } else if (c == '.') {
      n.cls.ranges = {{'\n', '\n'}, {'\r', '\r'}};
      n.cls.negated = true;
    } else if (c == '*' || c == '+' || c == '?' || c == '{' || c == ')' || c == ']') {
      --i_;
      return error("nothing to repeat or unbalanced bracket");
    } else {
      n.cls.ranges = {{c, c}};
    }
    *out = add(std::move(n));
    return Status::OK();
  }

  Status group(int* out) {
    bool look = false, negate = false;
    if (peek() == '?') {
      if (peek(1) == ':') {
        i_ += 2;
      } else if (peek(1) == '=' || peek(1) == '!') {
        look = true;
        negate = peek(1) == '!';
        i_ += 2;
      } else {
        return error("unsupported group (lookbehind, flags or named groups)");
      }
    }
    int inner = -1;
    LS_RETURN_IF_ERROR(alternation(&inner));
    if (!more() || peek() != ')') return error("missing ')'");
    ++i_;
    if (!look) {
      *out = inner;
      return Status::OK();
    }
    Node n = make_node(Kind::kLook);
    n.kids = {inner};
    n.negate = negate;
    *out = add(std::move(n));
    return Status::OK();
  }

  Status number(uint32_t* v) {
    if (!more() || peek() < '0' || peek() > '9') return error("expected a number in {}");
    uint32_t x = 0;
    while (more() && peek() >= '0' && peek() <= '9') x = x * 10 + (cps_[i_++] - '0');
    *v = x;
    return Status::OK();
  }

  Status quantifier(int* atom_id) {
    if (!more()) return Status::OK();
    uint32_t lo = 0, hi = 0;
    const uint32_t c = peek();
    if (c == '?') {
      lo = 0, hi = 1;
    } else if (c == '*') {
      lo = 0, hi = kUnbounded;
    } else if (c == '+') {
      lo = 1, hi = kUnbounded;
    } else if (c == '{') {
      ++i_;
      LS_RETURN_IF_ERROR(number(&lo));
      hi = lo;
      if (peek() == ',') {
        ++i_;
        hi = kUnbounded;
        if (peek() != '}') LS_RETURN_IF_ERROR(number(&hi));
      }
      if (peek() != '}' || hi < lo) return error("malformed {n,m}");
    } else {
      return Status::OK();
    }
    ++i_;
    Node n = make_node(Kind::kRepeat);
    n.kids = {*atom_id};
    n.min = lo;
    n.max = hi;
    if (more() && peek() == '?') {
      n.greedy = false;
      ++i_;
    } else if (more() && peek() == '+') {
      return error("possessive quantifiers are not supported");
    }
    *atom_id = add(std::move(n));
    return Status::OK();
  }

  // After '[': items up to ']'.
  Status bracket(CharClass* cls) {
    if (peek() == '^') {
      cls->negated = true;
      ++i_;
    }
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      uint32_t c = cps_[i_++];
      if (c == '\\') {
        CharClass e;
        LS_RETURN_IF_ERROR(escape(&e, /*in_class=*/true));
        if (e.negated) return error("negated escape inside a class");
        cls->flags |= e.flags;
        // A single escaped character may start a range (\x24-...), rarely used; a class escape may not.
        if (e.flags == 0 && e.ranges.size() == 1 && e.ranges[0].lo == e.ranges[0].hi) {
          c = e.ranges[0].lo;
        } else {
          cls->ranges.insert(cls->ranges.end(), e.ranges.begin(), e.ranges.end());
          continue;
        }
      }
      uint32_t hi = c;
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < cps_.size()) {
        ++i_;
        hi = cps_[i_++];
        if (hi == '\\') {
          CharClass e;
          LS_RETURN_IF_ERROR(escape(&e, true));
          if (e.flags != 0 || e.ranges.size() != 1) return error("bad range end");
          hi = e.ranges[0].lo;
        }
        if (hi < c) return error("range out of order");
      }
      cls->ranges.push_back({c, hi});
    }
    if (!more()) return error("missing ']'");
    ++i_;
    return Status::OK();
  }

  // After '\\'.
  Status escape(CharClass* cls, bool in_class) {
    if (!more()) return error("trailing backslash");
    const uint32_t c = cps_[i_++];
    switch (c) {
      case 's': cls->flags = kCpWhitespace; return Status::OK();
      case 'S': cls->flags = kCpWhitespace; cls->negated = true; return Status::OK();
      case 'd': cls->ranges = {{'0', '9'}}; return Status::OK();
      case 'D': cls->ranges = {{'0', '9'}}; cls->negated = true; return Status::OK();
      case 'w': cls->ranges = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; return Status::OK();
      case 'W': cls->ranges = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; cls->negated = true; return Status::OK();
      case 'r': cls->ranges = {{'\r', '\r'}}; return Status::OK();
      case 'n': cls->ranges = {{'\n', '\n'}}; return Status::OK();
      case 't': cls->ranges = {{'\t', '\t'}}; return Status::OK();
      case 'f': cls->ranges = {{'\f', '\f'}}; return Status::OK();
      case 'v': cls->ranges = {{'\v', '\v'}}; return Status::OK();
      case 'p': return property(cls);
      default: break;
    }
    const bool punct = c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'));
    if (!punct) {
      --i_;
      return error(std::string("unsupported escape \\") + static_cast<char>(c < 0x80 ? c : '?') +
                   (in_class ? " in a class" : ""));
    }
    cls->ranges = {{c, c}};
    return Status::OK();
  }

  // After "\p": {Name}.
  Status property(CharClass* cls) {
    if (peek() != '{') return error("expected \\p{...}");
    std::string name;
    for (++i_; more() && peek() != '}'; ++i_) name += static_cast<char>(peek());
    if (!more()) return error("missing '}'");
    ++i_;
    if (name == "L" || name == "Lu" || name == "Ll" || name == "Lt" || name == "Lm" || name == "Lo") {
      cls->flags = kCpLetter;
    } else if (name == "N") {
      cls->flags = kCpNumber;
    } else if (name == "P") {
      cls->flags = kCpPunctuation;
    } else if (name == "S") {
      cls->flags = kCpSymbol;
    } else if (name == "M") {
      cls->flags = kCpMark;
    } else if (name == "Han") {
      cls->flags = kCpHan;
    } else {
      return error("unsupported property \\p{" + name + "}");
    }
    return Status::OK();
  }

  SplitRegex::Program& prog_;
  std::vector<uint32_t> cps_;
  size_t i_ = 0;
};

// Marks the nodes that always consume exactly one unit: a class, or a
// sequence of lookaheads on such nodes followed by one (the (?=[\p{L}])[^a-z]
// idiom), so that repeating them needs no recursion per unit.
void find_single_unit_nodes(SplitRegex::Program& p) {
  for (Node& n : p.nodes) {  // children are always added before their parent
    if (n.kind == Kind::kClass) {
      n.single = {{&n.cls, true}};
    } else if (n.kind == Kind::kSeq && !n.kids.empty()) {
      std::vector<Node::Test> tests;
      bool ok = true;
      for (size_t k = 0; ok && k + 1 < n.kids.size(); ++k) {
        const Node& look = p.nodes[n.kids[k]];
        ok = look.kind == Kind::kLook && p.nodes[look.kids[0]].single.size() == 1;
        if (ok) tests.push_back({p.nodes[look.kids[0]].single[0].cls, !look.negate});
      }
      const Node& last = p.nodes[n.kids.back()];
      if (ok && !last.single.empty()) {
        tests.insert(tests.end(), last.single.begin(), last.single.end());
        n.single = std::move(tests);
      }
    }
  }
}

// Fills starts / starts_anywhere (children first), a superset of the units
// a match can begin with, so that alternatives and start positions that
// cannot match are skipped with one test. Lookahead and $ consume nothing
// and add no units.
void find_start_sets(SplitRegex::Program& p) {
  for (size_t id = 0; id < p.nodes.size(); ++id) {
    Node& n = p.nodes[id];
    if (!n.single.empty()) {
      n.starts = {static_cast<int>(id)};
      continue;
    }
    auto take = [&](const Node& kid) {
      n.starts_anywhere = n.starts_anywhere || kid.starts_anywhere;
      n.starts.insert(n.starts.end(), kid.starts.begin(), kid.starts.end());
    };
    auto nullable = [&](const Node& kid) {
      return kid.starts_anywhere || kid.kind == Kind::kLook || kid.kind == Kind::kEnd ||
             (kid.kind == Kind::kRepeat && kid.min == 0) || (kid.kind == Kind::kSeq && kid.kids.empty());
    };
    switch (n.kind) {
      case Kind::kAlt:
        for (int k : n.kids) take(p.nodes[k]);
        break;
      case Kind::kRepeat:
        take(p.nodes[n.kids[0]]);
        break;
      case Kind::kSeq: {
        bool all_nullable = true;
        for (int k : n.kids) {
          const Node& kid = p.nodes[k];
          if (kid.kind != Kind::kLook && kid.kind != Kind::kEnd) take(kid);
          if (!nullable(kid)) {
            all_nullable = false;
            break;
          }
        }
        n.starts_anywhere = n.starts_anywhere || all_nullable;
        break;
      }
      default:  // lookahead, $: zero width
        n.starts_anywhere = true;
    }
    if (n.starts_anywhere) n.starts.clear();
  }
}

bool unit_passes(const Node& n, const Unit& u) {
  for (const Node::Test& t : n.single) {
    if (t.cls->test(u) != t.want) return false;
  }
  return true;
}

bool may_start_with(const SplitRegex::Program& p, const Node& n, const Unit& u) {
  if (n.starts_anywhere) return true;
  for (int s : n.starts) {
    if (unit_passes(p.nodes[s], u)) return true;
  }
  return false;
}

void build_ascii_dispatch(SplitRegex::Program& p) {
  for (Node& n : p.nodes) {
    if (n.kind != Kind::kAlt || n.kids.size() > 64) continue;
    n.ascii_kids.assign(128, 0);
    for (uint32_t c = 0; c < 128; ++c) {
      const Unit u = make_unit(c);
      for (size_t k = 0; k < n.kids.size(); ++k) {
        if (may_start_with(p, p.nodes[n.kids[k]], u)) n.ascii_kids[c] |= uint64_t{1} << k;
      }
    }
  }
}

// Backtracking matcher over text[.., end).
class Matcher {
 public:
  Matcher(const SplitRegex::Program& p, const Unit* text, size_t end) : p_(p), t_(text), end_(end) {}

  // False when no match of node `id` can begin at pos (see find_start_sets).
  bool may_start(int id, size_t pos) const {
    const Node& n = p_.nodes[id];
    if (n.starts_anywhere) return true;
    if (pos >= end_) return false;
    if (!n.ascii_kids.empty() && t_[pos].cp < 128) return n.ascii_kids[t_[pos].cp] != 0;
    return may_start_with(p_, n, t_[pos]);
  }

  bool node(int id, size_t pos, Cont k) const {
    const Node& n = p_.nodes[id];
    if (!n.single.empty()) return pos < end_ && unit_ok(n, pos) && k(pos + 1);
    switch (n.kind) {
      case Kind::kSeq: return seq(n, 0, pos, k);
      case Kind::kAlt:
        if (!n.ascii_kids.empty() && pos < end_ && t_[pos].cp < 128) {
          for (uint64_t m = n.ascii_kids[t_[pos].cp]; m != 0; m &= m - 1) {
            if (node(n.kids[std::countr_zero(m)], pos, k)) return true;
          }
          return false;
        }
        for (int kid : n.kids) {
          if (may_start(kid, pos) && node(kid, pos, k)) return true;
        }
        return false;
      case Kind::kRepeat: {
        const Node& kid = p_.nodes[n.kids[0]];
        if (!kid.single.empty()) return repeat_units(n, kid, pos, k);
        return repeat(n, 0, pos, k);
      }
      case Kind::kLook: {
        auto accept = [](size_t) { return true; };
        const bool found = node(n.kids[0], pos, cont(accept));
        return found != n.negate && k(pos);
      }
      case Kind::kEnd: return pos == end_ && k(pos);
      case Kind::kClass: break;  // handled as single
    }
    return false;
  }

 private:
  bool unit_ok(const Node& n, size_t pos) const { return unit_passes(n, t_[pos]); }

  bool seq(const Node& n, size_t i, size_t pos, Cont k) const {
    if (i == n.kids.size()) return k(pos);
    auto next = [&](size_t p) { return seq(n, i + 1, p, k); };
    return node(n.kids[i], pos, cont(next));
  }

  // A repeated single-unit node: count the run once, then try lengths.
  bool repeat_units(const Node& n, const Node& kid, size_t pos, Cont k) const {
    size_t run = 0;
    while (run < n.max && pos + run < end_ && unit_ok(kid, pos + run)) ++run;
    if (run < n.min) return false;
    if (n.greedy) {
      for (size_t c = run + 1; c-- > n.min;) {
        if (k(pos + c)) return true;
      }
    } else {
      for (size_t c = n.min; c <= run; ++c) {
        if (k(pos + c)) return true;
      }
    }
    return false;
  }

  // The general case; an iteration that matches nothing ends the loop.
  bool repeat(const Node& n, uint32_t count, size_t pos, Cont k) const {
    auto again = [&](size_t p) { return p != pos && repeat(n, count + 1, p, k); };
    const bool may_stop = count >= n.min;
    const bool may_go = count < n.max;
    if (n.greedy) {
      if (may_go && node(n.kids[0], pos, cont(again))) return true;
      return may_stop && k(pos);
    }
    if (may_stop && k(pos)) return true;
    return may_go && node(n.kids[0], pos, cont(again));
  }

  const SplitRegex::Program& p_;
  const Unit* t_;
  size_t end_;
};

}  // namespace

Unit make_unit(uint32_t cp) {
  const uint16_t f = cp_flags(cp);
  return {(cp >= 0x80 && (f & kCpWhitespace)) ? 0x0Bu : cp, f};
}

SplitRegex::SplitRegex(std::unique_ptr<Program> p) : p_(std::move(p)) {}
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;
SplitRegex::~SplitRegex() = default;

Result<SplitRegex> SplitRegex::compile(std::string_view pattern) {
  auto p = std::make_unique<Program>();
  p->pattern = std::string(pattern);
  LS_RETURN_IF_ERROR(Parser(pattern, *p).run());
  find_single_unit_nodes(*p);
  find_start_sets(*p);
  build_ascii_dispatch(*p);
  return SplitRegex(std::move(p));
}

bool SplitRegex::find(const Unit* text, size_t begin, size_t end, size_t from, size_t* match_begin,
                      size_t* match_end) const {
  (void)begin;  // no lookbehind: the text before `from` is never examined
  const Matcher m(*p_, text, end);
  for (size_t start = from; start < end; ++start) {
    if (!m.may_start(p_->root, start)) continue;
    size_t got = start;
    auto accept = [&](size_t p) {
      if (p == start) return false;  // a match must not be empty
      got = p;
      return true;
    };
    if (m.node(p_->root, start, cont(accept))) {
      *match_begin = start;
      *match_end = got;
      return true;
    }
  }
  return false;
}

const std::string& SplitRegex::pattern() const { return p_->pattern; }

}  // namespace layerstream
