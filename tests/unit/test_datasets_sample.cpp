// Checks on the built-in sample set (datasets/sample/*.jsonl), read the way
// `--dataset sample` reads it. The demo, the simulator and the end-to-end tests
// all score against these gold answers, so a wrong `#### N` or a miscalculated
// step would show up to users as a server "getting it wrong". The tests keep
// the set a faithful GSM8K stand-in: enough questions, integer final answers,
// every calculator annotation correct, and no test question in the few-shot
// pool.
#include <datasets/dataset.hpp>

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

using diffeval::datasets::Dataset;
using diffeval::datasets::open_dataset;
using diffeval::datasets::Sample;

// Evaluates the left side of a GSM8K calculator annotation: decimal numbers,
// + - * / and parentheses. Anything else is nullopt, so a typo in the data
// fails a test instead of slipping past it.
class Arithmetic {
public:
    explicit Arithmetic(std::string_view text) : m_text(text) {}

    std::optional<double> evaluate() {
        auto value = sum();
        skip_spaces();
        if (!value || m_pos != m_text.size()) {
            return std::nullopt;
        }
        return value;
    }

private:
    // sum := product (('+' | '-') product)*
    std::optional<double> sum() {
        auto left = product();
        while (left) {
            char op = peek();
            if (op != '+' && op != '-') {
                break;
            }
            ++m_pos;
            auto right = product();
            if (!right) {
                return std::nullopt;
            }
            *left = op == '+' ? *left + *right : *left - *right;
        }
        return left;
    }

    // product := factor (('*' | '/') factor)*
    std::optional<double> product() {
        auto left = factor();
        while (left) {
            char op = peek();
            if (op != '*' && op != '/') {
                break;
            }
            ++m_pos;
            auto right = factor();
            if (!right || (op == '/' && *right == 0.0)) {
                return std::nullopt;
            }
            *left = op == '*' ? *left * *right : *left / *right;
        }
        return left;
    }

    // factor := number | '(' sum ')' | '-' factor
    std::optional<double> factor() {
        char c = peek();
        if (c == '-') {
            ++m_pos;
            auto inner = factor();
            return inner ? std::optional<double>(-*inner) : std::nullopt;
        }
        if (c == '(') {
            ++m_pos;
            auto inner = sum();
            if (!inner || peek() != ')') {
                return std::nullopt;
            }
            ++m_pos;
            return inner;
        }
        if ((c < '0' || c > '9') && c != '.') {
            return std::nullopt;
        }
        double value = 0;
        const char* begin = m_text.data() + m_pos;
        auto [end, ec] = std::from_chars(begin, m_text.data() + m_text.size(), value);
        if (ec != std::errc{}) {
            return std::nullopt;
        }
        m_pos += static_cast<size_t>(end - begin);
        return value;
    }

    // The next non-space character, or '\0' at the end.
    char peek() {
        skip_spaces();
        return m_pos < m_text.size() ? m_text[m_pos] : '\0';
    }

    void skip_spaces() {
        while (m_pos < m_text.size() && m_text[m_pos] == ' ') {
            ++m_pos;
        }
    }

    std::string_view m_text;
    size_t m_pos = 0;
};

// One `<<expr=value>>` annotation and the text that follows its closing `>>`.
struct Annotation {
    std::string expr;
    std::string value;
    std::string after;
};

std::vector<Annotation> annotations(const std::string& answer) {
    std::vector<Annotation> out;
    size_t pos = 0;
    while ((pos = answer.find("<<", pos)) != std::string::npos) {
        size_t close = answer.find(">>", pos);
        if (close == std::string::npos) {
            out.push_back({answer.substr(pos + 2), "", ""});
            break;
        }
        std::string body = answer.substr(pos + 2, close - pos - 2);
        size_t eq = body.rfind('=');
        size_t line_end = answer.find('\n', close);
        std::string after = answer.substr(
            close + 2, line_end == std::string::npos ? std::string::npos : line_end - close - 2);
        if (eq == std::string::npos) {
            out.push_back({body, "", after});
        } else {
            out.push_back({body.substr(0, eq), body.substr(eq + 1), after});
        }
        pos = close + 2;
    }
    return out;
}

std::string last_line(const std::string& answer) {
    size_t nl = answer.rfind('\n');
    return nl == std::string::npos ? answer : answer.substr(nl + 1);
}

std::optional<double> parse_number(const std::string& text) {
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

constexpr double k_tolerance = 1e-9;

class SampleSet : public ::testing::Test {
protected:
    void SetUp() override {
        auto ds = open_dataset("sample");
        ASSERT_TRUE(ds.ok()) << ds.error().message;
        m_ds = std::move(*ds);
    }

    // Test questions first, then the few-shot pool, each with a label for messages.
    std::vector<std::pair<std::string, const Sample*>> all_items() const {
        std::vector<std::pair<std::string, const Sample*>> out;
        for (const auto& s : m_ds.test) {
            out.emplace_back("test item " + std::to_string(s.index), &s);
        }
        for (const auto& s : m_ds.fewshot) {
            out.emplace_back("train item " + std::to_string(s.index), &s);
        }
        return out;
    }

    Dataset m_ds;
};

TEST(ArithmeticEvaluator, ComputesWhatAnnotationsUse) {
    EXPECT_DOUBLE_EQ(*Arithmetic("2 * (15 + 9)").evaluate(), 48.0);
    EXPECT_DOUBLE_EQ(*Arithmetic("1800*2/3").evaluate(), 1200.0);
    EXPECT_DOUBLE_EQ(*Arithmetic("42-15+9").evaluate(), 36.0);
    EXPECT_DOUBLE_EQ(*Arithmetic("18/24").evaluate(), 0.75);
    EXPECT_DOUBLE_EQ(*Arithmetic("-(3-5)*.5").evaluate(), 1.0);
    EXPECT_FALSE(Arithmetic("2+").evaluate());
    EXPECT_FALSE(Arithmetic("3 x 4").evaluate());
    EXPECT_FALSE(Arithmetic("(1+2").evaluate());
    EXPECT_FALSE(Arithmetic("4/0").evaluate());
}

TEST_F(SampleSet, HasEnoughTestQuestionsAndFewShotExamples) {
    EXPECT_EQ(m_ds.name, "sample");
    EXPECT_GE(m_ds.test.size(), 40u);
    EXPECT_GE(m_ds.fewshot.size(), 5u);
}

TEST_F(SampleSet, EveryAnswerEndsWithAnIntegerFinalLine) {
    const std::regex final_line(R"(#### -?[0-9]+)");
    for (const auto& [label, s] : all_items()) {
        EXPECT_TRUE(std::regex_match(last_line(s->answer), final_line))
            << label << " ends with '" << last_line(s->answer) << "'";
    }
}

TEST_F(SampleSet, EveryCalculatorAnnotationIsCorrect) {
    for (const auto& [label, s] : all_items()) {
        auto anns = annotations(s->answer);
        EXPECT_FALSE(anns.empty()) << label << " has no <<expr=value>> annotation";
        for (const auto& a : anns) {
            auto computed = Arithmetic(a.expr).evaluate();
            auto stated = parse_number(a.value);
            ASSERT_TRUE(computed) << label << ": cannot evaluate '" << a.expr << "'";
            ASSERT_TRUE(stated) << label << ": '" << a.value << "' is not a number";
            EXPECT_NEAR(*computed, *stated, k_tolerance)
                << label << ": <<" << a.expr << "=" << a.value << ">>";
            // GSM8K repeats the result right after the annotation; a mismatch
            // there is what a reader (and a model) would copy.
            EXPECT_EQ(a.after.rfind(a.value, 0), 0u) << label << ": <<" << a.expr << "=" << a.value
                                                     << ">> is followed by '" << a.after << "'";
        }
    }
}

TEST_F(SampleSet, FinalAnswerIsTheLastComputedValue) {
    for (const auto& [label, s] : all_items()) {
        auto anns = annotations(s->answer);
        auto line = last_line(s->answer);
        ASSERT_FALSE(anns.empty()) << label;
        ASSERT_EQ(line.rfind("#### ", 0), 0u) << label;
        auto stated = parse_number(line.substr(5));
        auto last = parse_number(anns.back().value);
        ASSERT_TRUE(stated && last) << label;
        EXPECT_NEAR(*stated, *last, k_tolerance) << label;
    }
}

TEST_F(SampleSet, NoTestQuestionIsAlsoAFewShotExample) {
    std::set<std::string> train;
    for (const auto& s : m_ds.fewshot) {
        train.insert(s.question);
    }
    for (const auto& s : m_ds.test) {
        EXPECT_EQ(train.count(s.question), 0u)
            << "test item " << s.index << " is also in the few-shot pool: " << s.question;
    }
}

TEST_F(SampleSet, SomeQuestionsCarryNonAsciiText) {
    // Real GSM8K has curly apostrophes; keeping a few here makes every demo
    // and end-to-end run push UTF-8 through request JSON and the store.
    int curly = 0;
    for (const auto& s : m_ds.test) {
        curly += s.question.find("\xE2\x80\x99") != std::string::npos ? 1 : 0;
    }
    EXPECT_GE(curly, 3);
}

} // namespace
