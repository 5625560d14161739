// Text templates for the simulated model. Every piece appended ends with a
// newline, so token counts add up piece by piece (a newline is always a
// token boundary) and length targets are met without re-tokenizing.
#include <harness/sim/writer.hpp>

#include <harness/sim/arithmetic.hpp>
#include <harness/sim/tokenizer.hpp>
#include <harness/util/hash.hpp>

#include <fmt/format.h>

#include <array>
#include <vector>

namespace diffeval::sim {

namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_letter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::vector<std::string> sentences(std::string_view text) {
    std::vector<std::string> out;
    std::string cur;
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '\n') {
            c = ' ';
        }
        if (cur.empty() && c == ' ') {
            continue;
        }
        cur += c;
        // "$1.50" is no sentence end: a full stop must be followed by a space.
        bool end = (c == '.' || c == '?' || c == '!') &&
                   (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\n');
        if (end) {
            out.push_back(cur);
            cur.clear();
        }
    }
    while (!cur.empty() && cur.back() == ' ') {
        cur.pop_back();
    }
    if (!cur.empty()) {
        out.push_back(cur);
    }
    return out;
}

bool has_quantity(std::string_view s) {
    static constexpr std::array<std::string_view, 16> k_words = {
        " one ",  " two ", " three ", " four ", " five ", " six ",   " seven ", " eight ",
        " nine ", " ten ", " twice",  " half",  " dozen", " triple", " double", " quarter"};
    for (char c : s) {
        if (is_digit(c)) {
            return true;
        }
    }
    for (auto w : k_words) {
        if (s.find(w) != std::string_view::npos) {
            return true;
        }
    }
    return false;
}

// A short bullet label for a sentence: the word after its first number
// ("16 eggs" -> "Eggs"), else "Given".
std::string label_for(std::string_view s) {
    static constexpr std::array<std::string_view, 23> k_skip = {
        "per",  "of",    "a",   "an",  "the",   "and", "to",   "in", "for", "each", "every", "more",
        "less", "times", "his", "her", "their", "its", "them", "he", "she", "they", "it"};
    size_t i = 0;
    while (i < s.size() && !is_digit(s[i])) {
        ++i;
    }
    bool money = i > 0 && i < s.size() && s[i - 1] == '$';
    while (i < s.size() && (is_digit(s[i]) || s[i] == ',' || s[i] == '.')) {
        ++i;
    }
    for (int words = 0; i < s.size() && words < 3; ++words) {
        while (i < s.size() && !is_letter(s[i])) {
            ++i;
        }
        size_t b = i;
        while (i < s.size() && is_letter(s[i])) {
            ++i;
        }
        std::string w(s.substr(b, i - b));
        bool skip = w.empty();
        for (auto k : k_skip) {
            skip = skip || w == k;
        }
        if (!skip) {
            w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
            return w == "Percent" ? "Percentage" : w;
        }
    }
    return money ? "Amount" : "Given";
}

std::string pretty(std::string_view expr) {
    std::string out;
    char prev = 0;
    for (char c : expr) {
        if (c == '+' || c == '*' || c == '/' || (c == '-' && (is_digit(prev) || prev == ')'))) {
            out += ' ';
            out += c;
            out += ' ';
        } else if (c != ' ') {
            out += c;
        }
        if (c != ' ') {
            prev = c;
        }
    }
    return out;
}

std::string strip_annotations(std::string_view line) {
    std::string out;
    size_t pos = 0;
    while (pos < line.size()) {
        size_t open = line.find("<<", pos);
        if (open == std::string_view::npos) {
            out += line.substr(pos);
            break;
        }
        out += line.substr(pos, open - pos);
        size_t close = line.find(">>", open);
        if (close == std::string_view::npos) {
            break;
        }
        pos = close + 2;
    }
    return out;
}

std::vector<std::string> lines_of(std::string_view body) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= body.size()) {
        size_t nl = body.find('\n', pos);
        std::string_view line =
            body.substr(pos, nl == std::string_view::npos ? body.npos : nl - pos);
        if (!line.empty()) {
            out.emplace_back(line);
        }
        if (nl == std::string_view::npos) {
            break;
        }
        pos = nl + 1;
    }
    return out;
}

std::string goal_of(const std::vector<std::string>& sents) {
    for (auto it = sents.rbegin(); it != sents.rend(); ++it) {
        if (!it->empty() && it->back() == '?') {
            return *it;
        }
    }
    return sents.empty() ? std::string("Find the requested amount.") : sents.back();
}

// Appends pieces and keeps their token count.
class Builder {
public:
    void add(const std::string& piece) {
        m_text += piece;
        m_tokens += count_tokens(piece);
    }
    int tokens() const { return m_tokens; }
    std::string take() { return std::move(m_text); }

private:
    std::string m_text;
    int m_tokens = 0;
};

// A re-check of step `i` that ends on an operand, not on the result, so a
// response cut inside the checks rarely ends on the answer.
std::string check_line(int variant, size_t i, const std::string& e, const std::string& r) {
    switch (variant % 4) {
    case 0:
        return fmt::format("- Step {}: {} = {}. That checks out.\n", i + 1, r, e);
    case 1:
        return fmt::format("- Recomputing step {}: I get {} from {}.\n", i + 1, r, e);
    case 2:
        return fmt::format("- Is {} right? It is {}, so yes.\n", r, e);
    default:
        return fmt::format("- {} comes from {}, which is consistent.\n", r, e);
    }
}

constexpr std::array<std::string_view, 5> k_pass_headers = {
    "Let me double-check each step.\n",
    "Wait, let me verify the arithmetic once more.\n",
    "Let me re-verify everything from the start to be safe.\n",
    "Hmm, I should make sure I did not misread any quantity.\n",
    "Let me recompute in a different order.\n",
};

} // namespace

std::string write_reasoning(std::string_view question, std::string_view answer,
                            const ReasoningPlan& plan) {
    auto sents = sentences(question);
    std::string goal = goal_of(sents);
    std::string body = solution_body(answer);
    std::string fin = final_answer(answer);
    auto steps = find_steps(body);
    int target = plan.target_tokens;
    int question_token = plan.question_at < 1.0 ? static_cast<int>(plan.question_at * target) : -1;
    bool question_in_goal = plan.question_at < 0.3;
    bool question_in_plan = !question_in_goal && plan.question_at < 0.45;
    bool question_written = question_in_goal || question_in_plan;

    Builder b;
    b.add("The user wants me to solve a math word problem.\n\n");
    b.add("**1. Analyze the input:**\n");
    for (const auto& s : sents) {
        if (s != goal && has_quantity(s)) {
            b.add(fmt::format("- **{}:** {}\n", label_for(s), s));
        }
    }
    b.add(fmt::format("- **{}:** {}\n\n", question_in_goal ? "Question" : "Goal", goal));
    b.add(question_in_plan ? "**2. Re-reading the Question:**\n" : "**2. Plan:**\n");
    b.add("I will go through the given quantities one by one and combine them.\n\n");
    b.add("**3. Step-by-step calculation:**\n");
    auto lines = lines_of(body);
    for (size_t i = 0; i < steps.size(); ++i) {
        b.add(fmt::format("- Step {}: {} = {}\n", i + 1, pretty(steps[i].expr), steps[i].result));
    }
    if (steps.empty()) {
        for (const auto& line : lines) {
            b.add(fmt::format("- {}\n", strip_annotations(line)));
        }
    }
    b.add("\n**4. Verification:**\n");
    for (int pass = 0; b.tokens() < target; ++pass) {
        if (!question_written && question_token >= 0 && b.tokens() >= question_token) {
            b.add("Let me look at the Question once more to be sure nothing was missed.\n");
            question_written = true;
        }
        auto h = util::hash64("pass", plan.seed + static_cast<uint64_t>(pass));
        b.add(std::string(k_pass_headers[h % k_pass_headers.size()]));
        if (h % k_pass_headers.size() == 3) {
            for (const auto& s : sents) {
                if (has_quantity(s)) {
                    b.add(fmt::format("- {}\n", s));
                }
            }
        }
        for (size_t i = 0; i < steps.size(); ++i) {
            b.add(check_line(static_cast<int>((h >> 8) + i), i, pretty(steps[i].expr),
                             steps[i].result));
        }
        if (steps.empty()) {
            b.add(fmt::format("- The result is still {}.\n", fin));
        }
    }
    b.add(fmt::format("\n**5. Final answer:**\nThe answer is {}.\n", fin));
    return b.take();
}

std::string write_verbose(std::string_view question, std::string_view answer, int target_tokens) {
    auto sents = sentences(question);
    std::string body = solution_body(answer);
    std::string fin = final_answer(answer);
    auto steps = find_steps(body);
    Builder b;
    b.add("Let's solve this step by step.\n\n**Understanding the problem:**\n");
    for (const auto& s : sents) {
        b.add(fmt::format("- {}\n", s));
    }
    b.add(fmt::format("\nWe need to find: {}\n\n**Solution:**\n", goal_of(sents)));
    size_t k = 0;
    for (const auto& line : lines_of(body)) {
        b.add(line + "\n");
        auto in_line = find_steps(line);
        for (const auto& st : in_line) {
            b.add(fmt::format("This means {} = {}.\n", pretty(st.expr), st.result));
        }
    }
    std::string tail = fmt::format("\n**Answer:** The final answer is {}.\n#### {}", fin, fin);
    int tail_tokens = count_tokens(tail);
    while (b.tokens() + tail_tokens < target_tokens) {
        if (steps.empty()) {
            b.add(fmt::format("Double-checking: the result is {}. Correct.\n", fin));
        } else {
            const auto& st = steps[k++ % steps.size()];
            b.add(fmt::format("Double-checking: {} = {}. Correct.\n", pretty(st.expr), st.result));
        }
    }
    return b.take() + tail;
}

std::string write_loop(std::string_view answer, int min_tokens) {
    auto lines = lines_of(solution_body(answer));
    std::string first = lines.empty() ? std::string("Let me think.") : lines.front();
    std::string repeated = lines.size() > 1 ? lines[1] : first;
    Builder b;
    b.add(first + "\n");
    std::string unit = repeated + "\n";
    int unit_tokens = count_tokens(unit);
    std::string text = b.take();
    int tokens = count_tokens(text);
    while (tokens < min_tokens) {
        text += unit;
        tokens += unit_tokens;
    }
    return text;
}

std::string without_hash(std::string_view answer) {
    return solution_body(answer) + "\nThe answer is " + final_answer(answer) + ".";
}

std::string synthetic_answer(std::string_view question) {
    std::vector<std::string> nums;
    for (size_t i = 0; i < question.size() && nums.size() < 2;) {
        if (is_digit(question[i])) {
            size_t j = i;
            while (j < question.size() && is_digit(question[j])) {
                ++j;
            }
            nums.emplace_back(question.substr(i, j - i));
            i = j;
        } else {
            ++i;
        }
    }
    while (nums.size() < 2) {
        nums.emplace_back(nums.empty() ? "2" : "3");
    }
    auto sum = evaluate(nums[0] + "+" + nums[1]).value_or(5);
    std::string r = format_number(sum);
    return fmt::format("Putting the two amounts together gives {} + {} = <<{}+{}={}>>{}.\n#### {}",
                       nums[0], nums[1], nums[0], nums[1], r, r, r);
}

} // namespace diffeval::sim
