#include "task/expression.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace kda::task {

struct Expression::Node {
  enum class Kind {
    kNumber,
    kName,
    kNeg,
    kNot,
    kAdd,
    kSub,
    kMul,
    kDiv,
    kMod,
    kMin,
    kMax,
    kCeilDiv,
    kLt,
    kLe,
    kGt,
    kGe,
    kEq,
    kNe,
    kAnd,
    kOr
  };
  Kind kind = Kind::kNumber;
  double number = 0;
  std::string name;
  int column = 0;
  std::vector<std::shared_ptr<const Node>> args;
};

namespace {

using Node = Expression::Node;
using NodePtr = std::shared_ptr<const Node>;

constexpr int kMaxDepth = 64;
constexpr size_t kMaxTokens = 4096;

struct Token {
  enum class Kind { kNumber, kName, kOp, kEnd } kind = Kind::kEnd;
  std::string text;
  double number = 0;
  int column = 0;  // 1-based
};

Result<std::vector<Token>> tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    int col = static_cast<int>(i) + 1;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '.' ||
                              ((s[j] == '+' || s[j] == '-') && j > i && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
        ++j;
      std::string text(s.substr(i, j - i));
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (end != text.c_str() + text.size() || !std::isfinite(v))
        return Status::bad_input("bad number '" + text + "' at column " + std::to_string(col));
      out.push_back({Token::Kind::kNumber, text, v, col});
      i = j;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::Kind::kName, std::string(s.substr(i, j - i)), 0, col});
      i = j;
    } else if (i + 1 < s.size() && (s.substr(i, 2) == "<=" || s.substr(i, 2) == ">=" || s.substr(i, 2) == "==" ||
                                    s.substr(i, 2) == "!=" || s.substr(i, 2) == "&&" || s.substr(i, 2) == "||")) {
      out.push_back({Token::Kind::kOp, std::string(s.substr(i, 2)), 0, col});
      i += 2;
    } else if (std::string_view("+-*/%(),<>!").find(c) != std::string_view::npos) {
      out.push_back({Token::Kind::kOp, std::string(1, c), 0, col});
      ++i;
    } else {
      return Status::bad_input("unexpected character '" + std::string(1, c) + "' at column " + std::to_string(col));
    }
  }
  out.push_back({Token::Kind::kEnd, "end of expression", 0, static_cast<int>(s.size()) + 1});
  return out;
}

// Recursive descent (C precedence): expr := conj ('||' conj)*; conj := cmp ('&&' cmp)*;
// cmp := sum (('<'|'<='|'>'|'>='|'=='|'!=') sum)?; sum := term (('+'|'-') term)*;
// term := unary (('*'|'/'|'%') unary)*; unary := ('-'|'!') unary | primary;
// primary := number | name | name '(' args ')' | '(' expr ')'. Comparisons and logic give 1 or 0
// (tunables.toml constraints); roofline formulas use only the arithmetic part.
class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Result<NodePtr> parse_all() {
    KDA_ASSIGN_OR_RETURN(NodePtr n, expr(0));
    if (peek().kind != Token::Kind::kEnd) return unexpected(peek());
    return n;
  }

 private:
  const Token& peek() const { return t_[pos_]; }
  const Token& next() { return t_[pos_ < t_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(const char* op) const { return peek().kind == Token::Kind::kOp && peek().text == op; }
  static Status unexpected(const Token& t) {
    return Status::bad_input("unexpected '" + t.text + "' at column " + std::to_string(t.column));
  }
  static NodePtr make(Node::Kind k, int col, std::vector<NodePtr> args) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->column = col;
    n->args = std::move(args);
    return n;
  }

  Result<NodePtr> expr(int depth) {
    if (depth > kMaxDepth)
      return Status::bad_input("expression nested too deeply at column " + std::to_string(peek().column));
    KDA_ASSIGN_OR_RETURN(NodePtr lhs, conj(depth));
    while (is_op("||")) {
      const Token& op = next();
      KDA_ASSIGN_OR_RETURN(NodePtr rhs, conj(depth));
      lhs = make(Node::Kind::kOr, op.column, {lhs, rhs});
    }
    return lhs;
  }

  Result<NodePtr> conj(int depth) {
    KDA_ASSIGN_OR_RETURN(NodePtr lhs, cmp(depth));
    while (is_op("&&")) {
      const Token& op = next();
      KDA_ASSIGN_OR_RETURN(NodePtr rhs, cmp(depth));
      lhs = make(Node::Kind::kAnd, op.column, {lhs, rhs});
    }
    return lhs;
  }

  Result<NodePtr> cmp(int depth) {
    KDA_ASSIGN_OR_RETURN(NodePtr lhs, sum(depth));
    static const std::pair<const char*, Node::Kind> kOps[] = {{"<", Node::Kind::kLt},  {"<=", Node::Kind::kLe},
                                                              {">", Node::Kind::kGt},  {">=", Node::Kind::kGe},
                                                              {"==", Node::Kind::kEq}, {"!=", Node::Kind::kNe}};
    for (const auto& [text, kind] : kOps) {
      if (!is_op(text)) continue;
      const Token& op = next();
      KDA_ASSIGN_OR_RETURN(NodePtr rhs, sum(depth));
      return make(kind, op.column, {lhs, rhs});
    }
    return lhs;
  }

  Result<NodePtr> sum(int depth) {
    KDA_ASSIGN_OR_RETURN(NodePtr lhs, term(depth));
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      KDA_ASSIGN_OR_RETURN(NodePtr rhs, term(depth));
      lhs = make(op.text == "+" ? Node::Kind::kAdd : Node::Kind::kSub, op.column, {lhs, rhs});
    }
    return lhs;
  }

  Result<NodePtr> term(int depth) {
    KDA_ASSIGN_OR_RETURN(NodePtr lhs, unary(depth));
    while (is_op("*") || is_op("/") || is_op("%")) {
      const Token& op = next();
      KDA_ASSIGN_OR_RETURN(NodePtr rhs, unary(depth));
      lhs = make(op.text == "*"   ? Node::Kind::kMul
                 : op.text == "/" ? Node::Kind::kDiv
                                  : Node::Kind::kMod,
                 op.column, {lhs, rhs});
    }
    return lhs;
  }

  Result<NodePtr> unary(int depth) {
    if (depth > kMaxDepth)
      return Status::bad_input("expression nested too deeply at column " + std::to_string(peek().column));
    if (is_op("-") || is_op("!")) {
      const Token& op = next();
      KDA_ASSIGN_OR_RETURN(NodePtr arg, unary(depth + 1));
      return make(op.text == "-" ? Node::Kind::kNeg : Node::Kind::kNot, op.column, {arg});
    }
    return primary(depth);
  }

  Result<NodePtr> primary(int depth) {
    const Token& t = next();
    if (t.kind == Token::Kind::kNumber) {
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::kNumber;
      n->number = t.number;
      n->column = t.column;
      return NodePtr(n);
    }
    if (t.kind == Token::Kind::kOp && t.text == "(") {
      KDA_ASSIGN_OR_RETURN(NodePtr inner, expr(depth + 1));
      if (!is_op(")")) return unexpected(peek());
      next();
      return inner;
    }
    if (t.kind != Token::Kind::kName) return unexpected(t);
    if (!is_op("(")) {
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::kName;
      n->name = t.text;
      n->column = t.column;
      return NodePtr(n);
    }
    Node::Kind kind;
    if (t.text == "min")
      kind = Node::Kind::kMin;
    else if (t.text == "max")
      kind = Node::Kind::kMax;
    else if (t.text == "ceil_div")
      kind = Node::Kind::kCeilDiv;
    else
      return Status::bad_input("unknown function '" + t.text + "' at column " + std::to_string(t.column));
    next();  // '('
    std::vector<NodePtr> args;
    if (!is_op(")")) {
      while (true) {
        KDA_ASSIGN_OR_RETURN(NodePtr a, expr(depth + 1));
        args.push_back(std::move(a));
        if (is_op(",")) {
          next();
          continue;
        }
        break;
      }
    }
    if (!is_op(")")) return unexpected(peek());
    next();
    if (kind == Node::Kind::kCeilDiv ? args.size() != 2 : args.empty())
      return Status::bad_input("'" + t.text + "' at column " + std::to_string(t.column) +
                               (kind == Node::Kind::kCeilDiv ? " takes 2 arguments" : " takes at least 1 argument"));
    return make(kind, t.column, std::move(args));
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
};

Result<double> eval(const Node& n, const std::map<std::string, int64_t>& vars) {
  switch (n.kind) {
    case Node::Kind::kNumber: return n.number;
    case Node::Kind::kName: {
      auto it = vars.find(n.name);
      if (it == vars.end())
        return Status::bad_input("unknown name '" + n.name + "' at column " + std::to_string(n.column));
      return static_cast<double>(it->second);
    }
    case Node::Kind::kNeg: {
      KDA_ASSIGN_OR_RETURN(double a, eval(*n.args[0], vars));
      return -a;
    }
    case Node::Kind::kNot: {
      KDA_ASSIGN_OR_RETURN(double a, eval(*n.args[0], vars));
      return a == 0 ? 1.0 : 0.0;
    }
    default: break;
  }
  std::vector<double> v;
  for (const auto& a : n.args) {
    KDA_ASSIGN_OR_RETURN(double x, eval(*a, vars));
    v.push_back(x);
  }
  auto div_zero = [&] { return Status::bad_input("division by zero at column " + std::to_string(n.column)); };
  switch (n.kind) {
    case Node::Kind::kAdd: return v[0] + v[1];
    case Node::Kind::kSub: return v[0] - v[1];
    case Node::Kind::kMul: return v[0] * v[1];
    case Node::Kind::kDiv:
      if (v[1] == 0) return div_zero();
      return v[0] / v[1];
    case Node::Kind::kMod:
      if (v[1] == 0) return div_zero();
      return std::fmod(v[0], v[1]);
    case Node::Kind::kLt: return v[0] < v[1] ? 1.0 : 0.0;
    case Node::Kind::kLe: return v[0] <= v[1] ? 1.0 : 0.0;
    case Node::Kind::kGt: return v[0] > v[1] ? 1.0 : 0.0;
    case Node::Kind::kGe: return v[0] >= v[1] ? 1.0 : 0.0;
    case Node::Kind::kEq: return v[0] == v[1] ? 1.0 : 0.0;
    case Node::Kind::kNe: return v[0] != v[1] ? 1.0 : 0.0;
    case Node::Kind::kAnd: return (v[0] != 0 && v[1] != 0) ? 1.0 : 0.0;
    case Node::Kind::kOr: return (v[0] != 0 || v[1] != 0) ? 1.0 : 0.0;
    case Node::Kind::kCeilDiv:
      if (v[1] == 0) return div_zero();
      return std::ceil(v[0] / v[1]);
    case Node::Kind::kMin: {
      double m = v[0];
      for (double x : v) m = std::min(m, x);
      return m;
    }
    case Node::Kind::kMax: {
      double m = v[0];
      for (double x : v) m = std::max(m, x);
      return m;
    }
    default: return Status::internal("bad expression node");
  }
}

void collect(const Node& n, std::set<std::string>& out) {
  if (n.kind == Node::Kind::kName) out.insert(n.name);
  for (const auto& a : n.args) collect(*a, out);
}

}  // namespace

Result<Expression> Expression::parse(std::string_view text) {
  KDA_ASSIGN_OR_RETURN(auto tokens, tokenize(text));
  // Bounds the tree (and so the recursion of evaluation) for hostile input.
  if (tokens.size() > kMaxTokens) return Status::bad_input("expression too long (more than 4096 tokens)");
  Parser p(std::move(tokens));
  KDA_ASSIGN_OR_RETURN(NodePtr root, p.parse_all());
  Expression e;
  e.text_ = std::string(text);
  e.root_ = std::move(root);
  return e;
}

Result<double> Expression::evaluate(const std::map<std::string, int64_t>& vars) const {
  if (!root_) return Status::internal("evaluating an empty expression");
  return eval(*root_, vars);
}

std::set<std::string> Expression::identifiers() const {
  std::set<std::string> out;
  if (root_) collect(*root_, out);
  return out;
}

}  // namespace kda::task
