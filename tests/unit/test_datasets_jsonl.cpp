// Tests for datasets::parse_jsonl and load_jsonl: how a GSM8K-format file a
// user points `--dataset` at is read, and what they are told when it is
// wrong. Error messages must name the file and the line so the user can open
// it and fix that line.
#include <datasets/dataset.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

using diffeval::datasets::load_jsonl;
using diffeval::datasets::parse_jsonl;
using diffeval::util::ErrorKind;
using ::testing::HasSubstr;

const std::string k_item_a = R"({"question": "How many?", "answer": "2 + 2 = <<2+2=4>>4\n#### 4"})";
const std::string k_item_b = R"({"question": "How much?", "answer": "#### 7"})";

TEST(ParseJsonl, ReadsQuestionsAndAnswersInOrder) {
    auto items = parse_jsonl(k_item_a + "\n" + k_item_b + "\n", "data/x.jsonl");
    ASSERT_TRUE(items.ok()) << items.error().message;
    ASSERT_EQ(items->size(), 2u);
    EXPECT_EQ((*items)[0].index, 0);
    EXPECT_EQ((*items)[0].question, "How many?");
    EXPECT_EQ((*items)[0].answer, "2 + 2 = <<2+2=4>>4\n#### 4");
    EXPECT_EQ((*items)[1].index, 1);
    EXPECT_EQ((*items)[1].answer, "#### 7");
}

TEST(ParseJsonl, LastLineNeedsNoNewline) {
    auto items = parse_jsonl(k_item_a + "\n" + k_item_b, "data/x.jsonl");
    ASSERT_TRUE(items.ok()) << items.error().message;
    EXPECT_EQ(items->size(), 2u);
}

TEST(ParseJsonl, DecodesUnicodeEscapesToUtf8) {
    auto items =
        parse_jsonl(R"({"question": "Mia\u2019s cat?", "answer": "#### 1"})", "data/x.jsonl");
    ASSERT_TRUE(items.ok()) << items.error().message;
    EXPECT_EQ((*items)[0].question, "Mia\xE2\x80\x99s cat?");
}

TEST(ParseJsonl, MalformedLineNamesOriginAndLine) {
    auto items =
        parse_jsonl(k_item_a + "\n" + k_item_b + "\n{\"question\": \"cut off\n", "data/x.jsonl");
    ASSERT_FALSE(items.ok());
    EXPECT_EQ(items.error().kind, ErrorKind::data);
    EXPECT_THAT(items.error().message, HasSubstr("data/x.jsonl:3"));
}

TEST(ParseJsonl, LineThatIsNotAnObjectIsAnError) {
    auto items = parse_jsonl(k_item_a + "\n[\"question\", \"answer\"]\n", "data/x.jsonl");
    ASSERT_FALSE(items.ok());
    EXPECT_THAT(items.error().message, HasSubstr("data/x.jsonl:2"));
}

TEST(ParseJsonl, MissingFieldIsAnErrorNamingTheLine) {
    auto items =
        parse_jsonl(k_item_a + "\n" + R"({"question": "No answer here?"})" + "\n", "data/x.jsonl");
    ASSERT_FALSE(items.ok());
    EXPECT_EQ(items.error().kind, ErrorKind::data);
    EXPECT_THAT(items.error().message, HasSubstr("data/x.jsonl:2"));
    EXPECT_THAT(items.error().message, HasSubstr("answer"));
}

TEST(ParseJsonl, NonStringFieldIsAnError) {
    auto items = parse_jsonl(R"({"question": "Sum?", "answer": 5})", "data/x.jsonl");
    ASSERT_FALSE(items.ok());
    EXPECT_THAT(items.error().message, HasSubstr("data/x.jsonl:1"));
}

TEST(ParseJsonl, SkipsBlankAndCommentLines) {
    auto text =
        "# exported by hand\n\n   \n" + k_item_a + "\n\t\n# another note\n" + k_item_b + "\n";
    auto items = parse_jsonl(text, "data/x.jsonl");
    ASSERT_TRUE(items.ok()) << items.error().message;
    ASSERT_EQ(items->size(), 2u);
    EXPECT_EQ((*items)[0].question, "How many?");
    EXPECT_EQ((*items)[1].index, 1);
}

TEST(ParseJsonl, SkippedLinesStillCountForErrorLineNumbers) {
    auto items = parse_jsonl("# note\n\n" + k_item_a + "\nnot json\n", "data/x.jsonl");
    ASSERT_FALSE(items.ok());
    EXPECT_THAT(items.error().message, HasSubstr("data/x.jsonl:4"));
}

TEST(ParseJsonl, HandlesCrlfLineEndings) {
    auto items =
        parse_jsonl("# note\r\n\r\n" + k_item_a + "\r\n" + k_item_b + "\r\n", "data/x.jsonl");
    ASSERT_TRUE(items.ok()) << items.error().message;
    ASSERT_EQ(items->size(), 2u);
    EXPECT_EQ((*items)[1].answer, "#### 7");
}

TEST(ParseJsonl, CrlfErrorsReportTheRightLine) {
    auto items = parse_jsonl(k_item_a + "\r\n" + k_item_b + "\r\n{oops}\r\n", "data/x.jsonl");
    ASSERT_FALSE(items.ok());
    EXPECT_THAT(items.error().message, HasSubstr("data/x.jsonl:3"));
}

TEST(ParseJsonl, EmptyFileIsAnError) {
    auto items = parse_jsonl("", "data/empty.jsonl");
    ASSERT_FALSE(items.ok());
    EXPECT_EQ(items.error().kind, ErrorKind::data);
    EXPECT_THAT(items.error().message, HasSubstr("data/empty.jsonl"));
}

TEST(ParseJsonl, FileOfOnlyCommentsIsAnError) {
    auto items = parse_jsonl("# nothing yet\n\n", "data/empty.jsonl");
    ASSERT_FALSE(items.ok());
    EXPECT_THAT(items.error().message, HasSubstr("data/empty.jsonl"));
}

TEST(LoadJsonl, MissingFileNamesThePath) {
    auto path = std::filesystem::path(::testing::TempDir()) / "diffeval-no-such-dataset.jsonl";
    std::filesystem::remove(path);
    auto items = load_jsonl(path);
    ASSERT_FALSE(items.ok());
    EXPECT_THAT(items.error().message, HasSubstr(path.string()));
}

// A run whose framings take the first N shots reads only as much of the
// few-shot file as holds them: the official train set's first five examples
// are a few KiB of its 4 MB. The examples are those a whole read gives, a
// file with fewer gives all it has, and a bad line among them is still
// named; a bad line past them is never read.
TEST(LoadJsonl, WithALimitReadsTheFirstSamplesOnly) {
    const auto dir = std::filesystem::path(::testing::TempDir());
    const auto path = dir / "diffeval-limit.jsonl";
    std::string text = "# shots\n\n";
    for (int i = 0; i < 3000; ++i) { // 150 KB: past the first 64 KiB read
        text += R"({"question": "Q)" + std::to_string(i) + R"(?", "answer": "#### )" +
                std::to_string(i) + "\"}\r\n";
    }
    const std::string bad_tail = "{\"question\": \"cut off\n";
    { std::ofstream(path, std::ios::binary) << text << bad_tail; }
    const auto whole = load_jsonl(path);
    ASSERT_FALSE(whole.ok());
    EXPECT_THAT(whole.error().message, HasSubstr(path.string() + ":3003"));
    for (size_t limit : {size_t{1}, size_t{5}, size_t{2999}, size_t{3000}}) {
        const auto first = load_jsonl(path, limit);
        ASSERT_TRUE(first.ok()) << limit << ": " << first.error().message;
        ASSERT_EQ(first->size(), limit);
        EXPECT_EQ(first->back().question, "Q" + std::to_string(limit - 1) + "?");
        EXPECT_EQ(first->back().answer, "#### " + std::to_string(limit - 1));
    }
    // Asking for more than the file's good lines reaches the bad one.
    const auto more = load_jsonl(path, 3001);
    ASSERT_FALSE(more.ok());
    EXPECT_THAT(more.error().message, HasSubstr(":3003"));
    // A file with fewer samples than asked for gives them all, its last
    // line without a newline too.
    { std::ofstream(path, std::ios::binary) << k_item_a << "\n" << k_item_b; }
    const auto fewer = load_jsonl(path, 5);
    ASSERT_TRUE(fewer.ok()) << fewer.error().message;
    ASSERT_EQ(fewer->size(), 2u);
    EXPECT_EQ(fewer->back().answer, "#### 7");
    // A bad line among the first ones is named as before.
    { std::ofstream(path, std::ios::binary) << k_item_a << "\n[1]\n" << k_item_b << "\n"; }
    const auto bad = load_jsonl(path, 5);
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.error().message, HasSubstr(path.string() + ":2"));
    std::filesystem::remove(path);
}

// A gold answer in a message: the final answer a reader compares, not the
// whole worked solution.
TEST(AnswerShown, NamesTheFinalAnswerOrTheStartOfTheText) {
    using diffeval::datasets::answer_shown;
    EXPECT_EQ(answer_shown("She has 9 - 3 = 6.\n#### 6"), "6");
    EXPECT_EQ(answer_shown("#### 1 #### 72 "), "72");
    EXPECT_EQ(answer_shown("no marker"), "'no marker'");
    EXPECT_EQ(answer_shown("####"), "''");
    EXPECT_EQ(answer_shown(std::string(50, 'x')), std::string(40, 'x') + "...");
    // Never cut in a UTF-8 sequence.
    std::string euros;
    for (int i = 0; i < 41; ++i) {
        euros += "\u20ac";
    }
    EXPECT_EQ(answer_shown(euros), euros.substr(0, 40 * 3) + "...");
}

// A path that names no file is said to be missing; a bare word is an
// unknown dataset name (docs audit: both were "unknown dataset").
TEST(OpenTestSet, AMissingFileIsNamedAsSuchAndAnUnknownNameAsAName) {
    auto missing = diffeval::datasets::open_test_set("/nonexistent/test.jsonl");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().kind, ErrorKind::usage);
    EXPECT_THAT(missing.error().message,
                HasSubstr("cannot read dataset /nonexistent/test.jsonl: no such file"));
    auto bare = diffeval::datasets::open_test_set("gsm8");
    ASSERT_FALSE(bare.ok());
    EXPECT_THAT(bare.error().message, HasSubstr("unknown dataset 'gsm8'"));
}

} // namespace

// A file an editor saved with a byte-order mark reads as one without it
// (it was "x.jsonl:1: not a JSON object"); a line the parser refuses says
// why in the parser's words.
TEST(ParseJsonl, AByteOrderMarkIsNoPartOfTheFirstLine) {
    auto items = parse_jsonl("\xEF\xBB\xBF" + k_item_a + "\n" + k_item_b + "\n", "data/x.jsonl");
    ASSERT_TRUE(items) << items.error().message;
    ASSERT_EQ(items->size(), 2u);
    EXPECT_EQ((*items)[0].question, "How many?");
    auto bad = parse_jsonl(k_item_a + "\n{\"question\": \"\\ud800\", \"answer\": \"#### 1\"}\n",
                           "data/x.jsonl");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("data/x.jsonl:2: not a JSON object ("), std::string::npos)
        << bad.error().message;
}
