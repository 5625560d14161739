// Annotation parsing, a recursive-descent evaluator and slip propagation for
// GSM8K solutions (see arithmetic.hpp for why wrong answers are built this way).
#include <harness/sim/arithmetic.hpp>

#include <harness/util/hash.hpp>
#include <harness/util/text.hpp>

#include <cmath>
#include <cstdio>
#include <map>

namespace diffeval::sim {

namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

class Parser {
public:
    explicit Parser(std::string_view s) : m_s(s) {}

    std::optional<double> parse() {
        auto v = sum();
        skip_space();
        if (!v || m_pos != m_s.size()) {
            return std::nullopt;
        }
        return v;
    }

private:
    void skip_space() {
        while (m_pos < m_s.size() && m_s[m_pos] == ' ') {
            ++m_pos;
        }
    }

    bool eat(char c) {
        skip_space();
        if (m_pos < m_s.size() && m_s[m_pos] == c) {
            ++m_pos;
            return true;
        }
        return false;
    }

    std::optional<double> sum() {
        auto v = product();
        while (v) {
            if (eat('+')) {
                auto r = product();
                v = r ? std::optional<double>(*v + *r) : std::nullopt;
            } else if (eat('-')) {
                auto r = product();
                v = r ? std::optional<double>(*v - *r) : std::nullopt;
            } else {
                break;
            }
        }
        return v;
    }

    std::optional<double> product() {
        auto v = unary();
        while (v) {
            if (eat('*')) {
                auto r = unary();
                v = r ? std::optional<double>(*v * *r) : std::nullopt;
            } else if (eat('/')) {
                auto r = unary();
                if (!r || *r == 0) {
                    return std::nullopt;
                }
                v = *v / *r;
            } else {
                break;
            }
        }
        return v;
    }

    std::optional<double> unary() {
        if (eat('-')) {
            auto v = unary();
            return v ? std::optional<double>(-*v) : std::nullopt;
        }
        if (eat('(')) {
            auto v = sum();
            if (!v || !eat(')')) {
                return std::nullopt;
            }
            return v;
        }
        skip_space();
        size_t start = m_pos;
        while (m_pos < m_s.size() && (is_digit(m_s[m_pos]) || m_s[m_pos] == '.')) {
            ++m_pos;
        }
        if (start == m_pos) {
            return std::nullopt;
        }
        std::string num(m_s.substr(start, m_pos - start));
        char* end = nullptr;
        double v = std::strtod(num.c_str(), &end);
        if (end != num.c_str() + num.size()) {
            return std::nullopt;
        }
        return v;
    }

    std::string_view m_s;
    size_t m_pos = 0;
};

std::string strip_commas(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c != ',') {
            out += c;
        }
    }
    return out;
}

// A number written in `text` at [begin, end): digits, optional thousands
// commas, optional decimals.
size_t number_end(std::string_view text, size_t pos) {
    size_t end = pos;
    while (end < text.size()) {
        if (is_digit(text[end])) {
            ++end;
        } else if ((text[end] == ',' || text[end] == '.') && end + 1 < text.size() &&
                   is_digit(text[end + 1]) && end > pos) {
            ++end;
        } else {
            break;
        }
    }
    return end;
}

// `text` with every whole number found in `repl` (keys without commas)
// replaced by its new value, keeping the comma style.
std::string substitute(std::string_view text, const std::map<std::string, std::string>& repl) {
    if (repl.empty()) {
        return std::string(text);
    }
    std::string out;
    for (size_t pos = 0; pos < text.size();) {
        if (is_digit(text[pos]) && (pos == 0 || !is_digit(text[pos - 1]))) {
            size_t end = number_end(text, pos);
            std::string_view written = text.substr(pos, end - pos);
            auto it = repl.find(strip_commas(written));
            if (it != repl.end()) {
                out += written.find(',') != std::string_view::npos ? util::with_commas(it->second)
                                                                   : it->second;
            } else {
                out += written;
            }
            pos = end;
            continue;
        }
        out += text[pos++];
    }
    return out;
}

// Deterministic uniform draws from `seed`.
class Draws {
public:
    explicit Draws(uint64_t seed) : m_seed(seed) {}
    double next() { return util::unit_interval(util::hash64("slip", m_seed + ++m_n)); }

private:
    uint64_t m_seed;
    uint64_t m_n = 0;
};

// A slipped value of `v`: a plausible one-step mistake.
double slip_value(double v, Draws& d) {
    bool integral = std::fabs(v - std::round(v)) < 1e-9;
    double r = d.next();
    double out = v;
    if (integral && std::fabs(v) >= 10 && r < 0.2) {
        out = std::fmod(v, 10) == 0 ? v / 10 : v * 10;
    } else if (integral && std::fabs(v) >= 12 && r < 0.45) {
        std::string s = format_number(std::fabs(v));
        for (size_t i = 0; i + 1 < s.size(); ++i) {
            if (s[i] != s[i + 1] && s[i + 1] != '0') {
                std::swap(s[i], s[i + 1]);
                out = std::strtod(s.c_str(), nullptr) * (v < 0 ? -1 : 1);
                break;
            }
        }
    } else if (integral && std::fabs(v) >= 100 && r < 0.65) {
        double unit = std::pow(10.0, std::floor(std::log10(std::fabs(v))));
        out = v + (d.next() < 0.5 && v - unit > 0 ? -unit : unit);
    } else {
        double step = d.next() < 0.7 ? 1 : 2;
        out = d.next() < 0.5 && v - step > 0 ? v - step : v + step;
    }
    if (out == v || out < 0) {
        out = v + 1;
    }
    return out;
}

struct SlipResult {
    std::string body;
    std::map<std::string, std::string> repl;
};

SlipResult slip_at(std::string_view body, const std::vector<Step>& steps, size_t s, Draws& d) {
    SlipResult r;
    r.body.assign(body.substr(0, steps[s].begin));
    size_t prev_end = steps[s].begin;
    for (size_t j = s; j < steps.size(); ++j) {
        const Step& st = steps[j];
        r.body += substitute(body.substr(prev_end, st.begin - prev_end), r.repl);
        std::string expr = st.expr;
        std::string result = st.result;
        if (j == s) {
            auto old = evaluate(st.result);
            result = format_number(slip_value(old.value_or(1), d));
        } else {
            std::string new_expr = substitute(st.expr, r.repl);
            if (new_expr != st.expr) {
                if (auto v = evaluate(new_expr)) {
                    expr = new_expr;
                    result = format_number(*v);
                }
            }
        }
        if (result != st.result) {
            r.repl[strip_commas(st.result)] = result;
        }
        r.body += "<<" + expr + "=" + result + ">>";
        prev_end = st.end;
    }
    r.body += substitute(body.substr(prev_end), r.repl);
    return r;
}

} // namespace

std::vector<Step> find_steps(std::string_view solution) {
    std::vector<Step> steps;
    size_t pos = 0;
    while ((pos = solution.find("<<", pos)) != std::string_view::npos) {
        size_t close = solution.find(">>", pos + 2);
        if (close == std::string_view::npos) {
            break;
        }
        std::string_view inner = solution.substr(pos + 2, close - pos - 2);
        size_t eq = inner.rfind('=');
        if (eq != std::string_view::npos) {
            steps.push_back(Step{pos, close + 2, std::string(inner.substr(0, eq)),
                                 std::string(inner.substr(eq + 1))});
        }
        pos = close + 2;
    }
    return steps;
}

std::optional<double> evaluate(std::string_view expr) {
    auto v = Parser(expr).parse();
    if (v && !std::isfinite(*v)) {
        return std::nullopt;
    }
    return v;
}

std::string format_number(double x) {
    if (std::fabs(x - std::round(x)) < 1e-9) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.0f", std::round(x));
        return std::string(buf) == "-0" ? "0" : buf;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", x);
    std::string s = buf;
    while (!s.empty() && s.back() == '0') {
        s.pop_back();
    }
    if (!s.empty() && s.back() == '.') {
        s.pop_back();
    }
    return s;
}

std::string final_answer(std::string_view answer) {
    size_t pos = answer.rfind("####");
    if (pos == std::string_view::npos) {
        return "";
    }
    std::string_view rest = answer.substr(pos + 4);
    size_t b = rest.find_first_not_of(" \t\n");
    size_t e = rest.find_last_not_of(" \t\n");
    return b == std::string_view::npos ? "" : std::string(rest.substr(b, e - b + 1));
}

std::string solution_body(std::string_view answer) {
    size_t pos = answer.rfind("####");
    std::string_view body = pos == std::string_view::npos ? answer : answer.substr(0, pos);
    size_t e = body.find_last_not_of(" \t\n");
    return e == std::string_view::npos ? "" : std::string(body.substr(0, e + 1));
}

std::string slip_answer(std::string_view answer, uint64_t seed) {
    std::string body = solution_body(answer);
    std::string fin = final_answer(answer);
    std::string fin_plain = strip_commas(fin);
    bool commas = fin.find(',') != std::string::npos;
    auto steps = find_steps(body);
    Draws d(seed);
    auto finish = [&](const std::string& new_body, const std::string& new_fin) {
        return new_body + "\n#### " + (commas ? util::with_commas(new_fin) : new_fin);
    };
    if (!steps.empty()) {
        size_t s = std::min(steps.size() - 1, static_cast<size_t>(d.next() * steps.size()));
        auto r = slip_at(body, steps, s, d);
        auto it = r.repl.find(fin_plain);
        if (it == r.repl.end()) {
            // The slipped step did not feed the final answer: slip the last
            // step that produces it instead.
            for (size_t j = steps.size(); j-- > 0;) {
                if (strip_commas(steps[j].result) == fin_plain) {
                    r = slip_at(body, steps, j, d);
                    it = r.repl.find(fin_plain);
                    break;
                }
            }
        }
        if (it != r.repl.end() && it->second != fin_plain) {
            return finish(r.body, it->second);
        }
    }
    auto v = evaluate(fin_plain);
    std::string wrong = format_number(slip_value(v.value_or(1), d));
    std::map<std::string, std::string> repl{{fin_plain, wrong}};
    return finish(substitute(body, repl), wrong);
}

} // namespace diffeval::sim
