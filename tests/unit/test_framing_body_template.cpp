// A pasted-together body is the body the framing renders, byte for byte: the
// run sends the template's bytes, so any difference would be a request that
// is no longer vLLM's or lm-eval's.
#include <harness/framing/body_template.hpp>
#include <harness/framing/framing.hpp>
#include <harness/util/pyjson.hpp>

#include <gtest/gtest.h>

using namespace diffeval;

namespace {

framing::BodyTemplate::Render slow(const framing::Renderer& r,
                                   const std::optional<std::string>& model,
                                   const nlohmann::ordered_json& extra) {
    return [&r, model, extra](const datasets::Sample& s, int max_tokens) {
        return util::python_json_dumps(r.body(s, max_tokens, model, extra));
    };
}

} // namespace

TEST(BodyTemplate, FixedShotFramingsPasteTheBytesTheyRender) {
    auto dataset = datasets::open_dataset("sample");
    ASSERT_TRUE(dataset) << dataset.error().message;
    const nlohmann::ordered_json extra = {{"top_p", 0.95}, {"stream", true}};
    for (const char* name : {"raw", "chat", "vllm-chat"}) {
        auto f = framing::load_framing(name);
        ASSERT_TRUE(f) << f.error().message;
        framing::Overrides o;
        o.gen_prefix = " \xc3\xa9";
        framing::Renderer r(framing::apply_overrides(*f, o), *dataset);
        for (const auto& model : {std::optional<std::string>(), std::optional<std::string>("m")}) {
            const auto render = slow(r, model, extra);
            auto t = framing::BodyTemplate::make(render);
            ASSERT_TRUE(t) << name;
            for (const auto& q : dataset->test) {
                for (int max_tokens : {1, 256, 32768}) {
                    ASSERT_EQ(t->render(q, max_tokens), render(q, max_tokens))
                        << name << " question " << q.index;
                }
            }
        }
    }
}

TEST(BodyTemplate, QuestionsThatLookLikeTheTemplateStillRenderExactly) {
    auto dataset = datasets::open_dataset("sample");
    ASSERT_TRUE(dataset) << dataset.error().message;
    auto f = framing::load_framing("raw");
    ASSERT_TRUE(f);
    framing::Renderer r(*f, *dataset);
    const auto render = slow(r, std::nullopt, nlohmann::ordered_json::object());
    auto t = framing::BodyTemplate::make(render);
    ASSERT_TRUE(t);
    for (const std::string& text :
         {std::string("Give 256 apples \"max_tokens\": 5, {question} {answer}"),
          std::string("\\u00e9 \x01\x1f\x7f tabs\there \xe2\x80\xa8 and \xf4\x8f\xbf\xbf"),
          std::string()}) {
        datasets::Sample s{3, text, "#### 256"};
        EXPECT_EQ(t->render(s, 256), render(s, 256)) << text;
    }
}

TEST(BodyTemplate, RandomShotsAreRenderedOneByOne) {
    auto dataset = datasets::open_dataset("sample");
    ASSERT_TRUE(dataset) << dataset.error().message;
    auto f = framing::load_framing("lm-eval-chat");
    ASSERT_TRUE(f);
    framing::Renderer r(*f, *dataset);
    EXPECT_FALSE(framing::BodyTemplate::make(slow(r, "m", nlohmann::ordered_json::object())));
}
