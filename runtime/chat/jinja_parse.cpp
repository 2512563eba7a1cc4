// Jinja parsing: the template is cut into text and tags (with whitespace
// control as jinja2 with trim_blocks and lstrip_blocks does it), each tag's
// content is tokenized, and a recursive-descent parser builds the nodes.
#include <cctype>

#include "runtime/chat/jinja_ast.h"

namespace layerstream::chat::jinja {
namespace {

struct Segment {
  enum class Kind { kText, kExpr, kStmt } kind;
  std::string content;
  int line;
};

int line_at(const std::string& s, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos && i < s.size(); ++i) line += s[i] == '\n';
  return line;
}

// The end of a tag opened at `from` (the position of `close`), skipping
// quoted strings.
size_t find_close(const std::string& s, size_t from, const char* close) {
  char quote = 0;
  for (size_t i = from; i + 1 < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == '\\')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == close[0] && s[i + 1] == close[1]) {
      return i;
    }
  }
  return std::string::npos;
}

std::vector<Segment> cut(const std::string& src) {
  std::vector<Segment> out;
  size_t pos = 0;
  bool strip_next = false, trim_newline = false;
  while (pos <= src.size()) {
    size_t start = std::string::npos;
    for (const char* open : {"{{", "{%", "{#"}) start = std::min(start, src.find(open, pos));
    std::string text = src.substr(pos, start == std::string::npos ? std::string::npos : start - pos);
    if (strip_next) {
      size_t i = 0;
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      text.erase(0, i);
    } else if (trim_newline) {
      if (text.rfind("\n", 0) == 0)
        text.erase(0, 1);
      else if (text.rfind("\r\n", 0) == 0)
        text.erase(0, 2);
    }
    strip_next = trim_newline = false;
    if (start == std::string::npos) {
      if (!text.empty()) out.push_back({Segment::Kind::kText, text, line_at(src, pos)});
      break;
    }
    const char type = src[start + 1];
    const char* close = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    const char mod = start + 2 < src.size() ? src[start + 2] : 0;
    if (mod == '-') {
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    } else if (type != '{' && mod != '+') {  // lstrip_blocks: a block tag alone on its line
      size_t k = 0;
      while (k < start && (src[start - k - 1] == ' ' || src[start - k - 1] == '\t')) ++k;
      if (start - k == 0 || src[start - k - 1] == '\n') text.erase(text.size() - std::min(k, text.size()));
    }
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, line_at(src, pos)});
    const size_t end = type == '#' ? src.find("#}", start + 2) : find_close(src, start + 2, close);
    if (end == std::string::npos)
      throw Error("line " + std::to_string(line_at(src, start)) + ": '" + src.substr(start, 2) +
                  "' is never closed");
    std::string inner = src.substr(start + 2, end - start - 2);
    bool right_strip = false;
    if (!inner.empty() && (inner[0] == '-' || inner[0] == '+')) inner.erase(0, 1);
    if (!inner.empty() && inner.back() == '-') {
      inner.pop_back();
      right_strip = true;
    } else if (!inner.empty() && inner.back() == '+') {
      inner.pop_back();
    }
    if (type != '#')
      out.push_back({type == '{' ? Segment::Kind::kExpr : Segment::Kind::kStmt, inner, line_at(src, start)});
    strip_next = right_strip;
    trim_newline = !right_strip && type != '{';  // trim_blocks
    pos = end + 2;
  }
  return out;
}

// ---- expression tokens ----------------------------------------------------

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind;
  std::string text;
};

std::vector<Token> tokenize(const std::string& s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::Kind::kName, s.substr(i, j - i)});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() &&
             (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_' ||
              (s[j] == '.' && !is_float && j + 1 < s.size() && std::isdigit((unsigned char)s[j + 1])))) {
        is_float |= s[j] == '.';
        ++j;
      }
      out.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, s.substr(i, j - i)});
      i = j;
    } else if (c == '"' || c == '\'') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          const char e = s[++j];
          v += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        } else {
          v += s[j];
        }
      }
      if (j >= s.size()) throw Error("line " + std::to_string(line) + ": unterminated string");
      out.push_back({Token::Kind::kString, v});
      i = j + 1;
    } else {
      static const char* two[] = {"==", "!=", "<=", ">=", "//", "**"};
      std::string op(1, c);
      for (const char* t : two)
        if (s.compare(i, 2, t) == 0) op = t;
      if (std::string("+-*/%~|.,:()[]{}=<>!").find(c) == std::string::npos)
        throw Error("line " + std::to_string(line) + ": unexpected character '" + std::string(1, c) + "'");
      out.push_back({Token::Kind::kOp, op});
      i += op.size();
    }
  }
  out.push_back({Token::Kind::kEnd, ""});
  return out;
}

// ---- expressions ------------------------------------------------------------

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  // allow_if: `a if c else b` (off for a for loop's iterable, whose `if` filters)
  ExprPtr expression(bool allow_if = true) {
    ExprPtr e = or_expr();
    if (allow_if && is_name("if")) {  // a if cond else b
      ++i_;
      auto x = node(Expr::Kind::kTernary);
      ExprPtr cond = or_expr();
      ExprPtr other;
      if (is_name("else")) {
        ++i_;
        other = expression();
      } else {
        other = std::make_shared<Expr>();  // undefined
      }
      x->args = {cond, e, other};
      return x;
    }
    return e;
  }
  // `a, b` without brackets (for targets and `set a = 1, 2` are rare; tuples in parentheses are parsed in
  // primary)
  bool at_end() const { return t_[i_].kind == Token::Kind::kEnd; }
  bool is_name(const char* n) const { return t_[i_].kind == Token::Kind::kName && t_[i_].text == n; }
  bool is_op(const char* o) const { return t_[i_].kind == Token::Kind::kOp && t_[i_].text == o; }
  std::string name() {
    if (t_[i_].kind != Token::Kind::kName) fail("a name");
    return t_[i_++].text;
  }
  void expect_op(const char* o) {
    if (!is_op(o)) fail(std::string("'") + o + "'");
    ++i_;
  }
  void expect_name(const char* n) {
    if (!is_name(n)) fail(std::string("'") + n + "'");
    ++i_;
  }
  void expect_end() {
    if (!at_end()) fail("the end of the tag");
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("line " + std::to_string(line_) + ": expected " + what + " but found '" +
                (at_end() ? std::string("end of tag") : t_[i_].text) + "'");
  }
  bool accept_op(const char* o) {
    if (!is_op(o)) return false;
    ++i_;
    return true;
  }

 private:
  ExprPtr node(Expr::Kind k) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr l, ExprPtr r) {
    auto e = node(Expr::Kind::kBinary);
    e->name = std::move(op);
    e->args = {std::move(l), std::move(r)};
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      ++i_;
      e = binary("or", e, and_expr());
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      ++i_;
      e = binary("and", e, not_expr());
    }
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      ++i_;
      auto e = node(Expr::Kind::kNot);
      e->args = {not_expr()};
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = concat();
    for (;;) {
      std::string op;
      if (t_[i_].kind == Token::Kind::kOp &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        op = t_[i_++].text;
      } else if (is_name("in")) {
        ++i_;
        op = "in";
      } else if (is_name("not") && t_[i_ + 1].kind == Token::Kind::kName && t_[i_ + 1].text == "in") {
        i_ += 2;
        op = "not in";
      } else {
        return e;
      }
      e = binary(op, e, concat());
    }
  }
  ExprPtr concat() {
    ExprPtr e = additive();
    while (accept_op("~")) e = binary("~", e, additive());
    return e;
  }
  ExprPtr additive() {
    ExprPtr e = multiplicative();
    while (is_op("+") || is_op("-")) {
      std::string op = t_[i_++].text;
      e = binary(op, e, multiplicative());
    }
    return e;
  }
  ExprPtr multiplicative() {
    ExprPtr e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = t_[i_++].text;
      e = binary(op, e, power());
    }
    return e;
  }
  // As jinja2: `**` binds looser than unary minus (-2 ** 2 is 4), and
  // filters and tests apply to the negated value (-3|abs is 3).
  ExprPtr power() {
    ExprPtr e = unary();
    while (accept_op("**")) e = binary("**", e, unary());
    return e;
  }
  ExprPtr unary(bool with_filters = true) {
    ExprPtr e;
    if (accept_op("-")) {
      e = node(Expr::Kind::kNeg);
      e->args = {unary(false)};
    } else if (accept_op("+")) {
      e = unary(false);
    } else {
      e = postfix(primary(), false);
    }
    return with_filters ? postfix(e, true) : e;
  }
  void call_args(Expr& e) {
    // after '('
    while (!accept_op(")")) {
      if (t_[i_].kind == Token::Kind::kName && t_[i_ + 1].kind == Token::Kind::kOp &&
          t_[i_ + 1].text == "=") {
        std::string k = t_[i_].text;
        i_ += 2;
        e.kwargs.emplace_back(k, expression());
      } else {
        e.args.push_back(expression());
      }
      if (!is_op(")")) expect_op(",");
    }
  }
  // Attribute, item, slice and call suffixes; with `filters` also `|f` and `is t`.
  ExprPtr postfix(ExprPtr e, bool filters) {
    for (;;) {
      if (accept_op(".")) {
        auto a = node(Expr::Kind::kAttr);
        a->name = t_[i_].kind == Token::Kind::kInt ? t_[i_++].text : name();
        a->args = {e};
        e = a;
      } else if (accept_op("[")) {
        ExprPtr parts[3];
        int n = 0;
        bool slice = false;
        for (;;) {
          if (!is_op(":") && !is_op("]")) parts[n] = expression();
          if (accept_op(":")) {
            slice = true;
            if (++n > 2) fail("']'");
            continue;
          }
          expect_op("]");
          break;
        }
        auto x = node(slice ? Expr::Kind::kSlice : Expr::Kind::kItem);
        x->args = {e, parts[0], parts[1], parts[2]};
        if (!slice) x->args.resize(2);
        e = x;
      } else if (accept_op("(")) {
        auto c = node(Expr::Kind::kCall);
        c->args = {e};
        call_args(*c);
        e = c;
      } else if (filters && accept_op("|")) {
        auto f = node(Expr::Kind::kFilter);
        f->name = name();
        f->args = {e};
        if (accept_op("(")) call_args(*f);
        e = f;
      } else if (filters && is_name("is")) {
        ++i_;
        auto t = node(Expr::Kind::kTest);
        if (is_name("not")) {
          ++i_;
          t->negated = true;
        }
        t->name = name();
        t->args = {e};
        if (accept_op("(")) {
          call_args(*t);
        } else if (t_[i_].kind == Token::Kind::kString || t_[i_].kind == Token::Kind::kInt ||
                   t_[i_].kind == Token::Kind::kFloat ||
                   (t_[i_].kind == Token::Kind::kName && t_[i_].text != "and" && t_[i_].text != "or" &&
                    t_[i_].text != "else" && t_[i_].text != "if")) {
          t->args.push_back(primary());  // `x is divisibleby 3`, `x is sameas none`
        }
        e = t;
      } else {
        return e;
      }
    }
  }
  ExprPtr primary() {
    const Token& t = t_[i_];
    auto lit = [&](Value v) {
      ++i_;
      auto e = node(Expr::Kind::kLiteral);
      e->literal = std::move(v);
      return e;
    };
    switch (t.kind) {
      case Token::Kind::kString: {
        std::string s = t.text;
        ++i_;
        while (t_[i_].kind == Token::Kind::kString) s += t_[i_++].text;  // adjacent literals join
        auto e = node(Expr::Kind::kLiteral);
        e->literal = Value(s);
        return e;
      }
      case Token::Kind::kInt: {
        std::string digits;
        for (char c : t.text)
          if (c != '_') digits += c;
        return lit(Value(static_cast<int64_t>(std::stoll(digits))));
      }
      case Token::Kind::kFloat:
        return lit(Value(std::stod(t.text)));
      case Token::Kind::kName: {
        if (t.text == "true" || t.text == "True") return lit(Value(true));
        if (t.text == "false" || t.text == "False") return lit(Value(false));
        if (t.text == "none" || t.text == "None") return lit(Value::none());
        auto e = node(Expr::Kind::kName);
        e->name = t.text;
        ++i_;
        return e;
      }
      case Token::Kind::kOp:
        if (accept_op("(")) {
          if (accept_op(")")) return node(Expr::Kind::kTuple);
          ExprPtr first = expression();
          if (accept_op(")")) return first;
          auto tup = node(Expr::Kind::kTuple);
          tup->args.push_back(first);
          while (accept_op(",")) {
            if (is_op(")")) break;
            tup->args.push_back(expression());
          }
          expect_op(")");
          return tup;
        }
        if (accept_op("[")) {
          auto l = node(Expr::Kind::kList);
          while (!accept_op("]")) {
            l->args.push_back(expression());
            if (!is_op("]")) expect_op(",");
          }
          return l;
        }
        if (accept_op("{")) {
          auto d = node(Expr::Kind::kDict);
          while (!accept_op("}")) {
            ExprPtr k = expression();
            expect_op(":");
            d->args.push_back(k);
            d->args.push_back(expression());
            if (!is_op("}")) expect_op(",");
          }
          return d;
        }
        break;
      case Token::Kind::kEnd:
        break;
    }
    fail("an expression");
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int line_;
};

// ---- statements -------------------------------------------------------------

class StmtParser {
 public:
  explicit StmtParser(std::vector<Segment> segs) : s_(std::move(segs)) {}

  Body parse_all() {
    std::string end;
    Body b = body({}, end);
    return b;
  }

 private:
  // Parses until a statement whose keyword is in `ends`; `end` gets it and
  // ended_parser_ its tokens (for `elif cond`).
  // {% if %} ... {% elif %} ... {% else %} ... {% endif %}
  void parse_if(ExprParser& p, Node& n, int line) {
    n.kind = Node::Kind::kIf;
    ExprPtr cond = p.expression();
    p.expect_end();
    for (;;) {
      std::string stop;
      Body b = body({"elif", "else", "endif"}, stop);
      n.branches.emplace_back(cond, std::move(b));
      if (stop == "elif") {
        cond = last_->expression();
        last_->expect_end();
        continue;
      }
      if (stop == "else") {
        std::string stop2;
        n.else_body = body({"endif"}, stop2);
        if (stop2.empty()) unclosed("if", line);
      } else if (stop.empty()) {
        unclosed("if", line);
      }
      break;
    }
  }

  // {% for a, b in expr [if cond] %} ... [{% else %} ...] {% endfor %}
  void parse_for(ExprParser& p, Node& n, int line) {
    n.kind = Node::Kind::kFor;
    n.targets.push_back(p.name());
    while (p.accept_op(",")) n.targets.push_back(p.name());
    p.expect_name("in");
    n.expr = p.expression(/*allow_if=*/false);
    if (p.is_name("if")) {
      p.name();
      n.cond = p.expression();
    }
    p.expect_end();
    std::string stop;
    n.body = body({"else", "endfor"}, stop);
    if (stop == "else") n.else_body = body({"endfor"}, stop);
    if (stop != "endfor") unclosed("for", line);
  }

  // {% set x[.attr] = expr %}, or the block form {% set x %} ... {% endset %}
  void parse_set(ExprParser& p, Node& n, int line) {
    std::string name = p.name();
    if (p.accept_op(".")) n.attr = p.name();
    n.text = name;
    if (p.accept_op("=")) {
      n.kind = Node::Kind::kSet;
      n.expr = p.expression();
      p.expect_end();
    } else {
      p.expect_end();
      n.kind = Node::Kind::kSetBlock;
      std::string stop;
      n.body = body({"endset"}, stop);
      if (stop.empty()) unclosed("set", line);
    }
  }

  // {% macro name(a, b=default) %} ... {% endmacro %}
  void parse_macro(ExprParser& p, Node& n, int line) {
    n.kind = Node::Kind::kMacro;
    n.text = p.name();
    p.expect_op("(");
    while (!p.accept_op(")")) {
      n.targets.push_back(p.name());
      n.defaults.push_back(p.accept_op("=") ? p.expression() : nullptr);
      if (!p.is_op(")")) p.expect_op(",");
    }
    p.expect_end();
    std::string stop;
    n.body = body({"endmacro"}, stop);
    if (stop.empty()) unclosed("macro", line);
  }

  Body body(const std::vector<std::string>& ends, std::string& end) {
    Body out;
    while (i_ < s_.size()) {
      const Segment& seg = s_[i_++];
      auto n = std::make_shared<Node>();
      n->line = seg.line;
      if (seg.kind == Segment::Kind::kText) {
        n->kind = Node::Kind::kText;
        n->text = seg.content;
        out.push_back(n);
        continue;
      }
      auto p = std::make_unique<ExprParser>(tokenize(seg.content, seg.line), seg.line);
      if (seg.kind == Segment::Kind::kExpr) {
        n->kind = Node::Kind::kOutput;
        n->expr = p->expression();
        p->expect_end();
        out.push_back(n);
        continue;
      }
      const std::string kw = p->name();
      for (const std::string& e : ends) {
        if (kw == e) {
          end = kw;
          last_ = std::move(p);
          return out;
        }
      }
      if (kw == "if") {
        parse_if(*p, *n, seg.line);
      } else if (kw == "for") {
        parse_for(*p, *n, seg.line);
      } else if (kw == "set") {
        parse_set(*p, *n, seg.line);
      } else if (kw == "macro") {
        parse_macro(*p, *n, seg.line);
      } else if (kw == "break" || kw == "continue") {
        n->kind = kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
        p->expect_end();
      } else if (kw == "generation" || kw == "endgeneration") {
        continue;  // Hugging Face's marker for assistant tokens: renders nothing
      } else {
        throw Error("line " + std::to_string(seg.line) + ": unknown or unexpected tag '" + kw + "'" +
                    (ends.empty() ? std::string() : " (expected " + ends.back() + ")"));
      }
      out.push_back(n);
    }
    if (!ends.empty()) end.clear();
    return out;
  }
  [[noreturn]] void unclosed(const char* what, int line) {
    throw Error("line " + std::to_string(line) + ": '" + what + "' is never closed (missing 'end" + what +
                "')");
  }

  std::vector<Segment> s_;
  size_t i_ = 0;
  std::unique_ptr<ExprParser> last_;
};

}  // namespace

NodePtr parse_template(const std::string& source) {
  StmtParser p(cut(source));
  auto root = std::make_shared<Node>();
  root->kind = Node::Kind::kBody;
  root->body = p.parse_all();
  return root;
}

}  // namespace layerstream::chat::jinja
