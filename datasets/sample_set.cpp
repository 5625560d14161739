// The project's own sample set, embedded from datasets/sample/.
#include <datasets/dataset.hpp>

#include <harness/util/embedded.hpp>

namespace diffeval::datasets {

const std::string& sample_test_jsonl() {
    static const std::string text(util::embedded_file("datasets/sample/test.jsonl").value_or(""));
    return text;
}

const std::string& sample_train_jsonl() {
    static const std::string text(util::embedded_file("datasets/sample/train.jsonl").value_or(""));
    return text;
}

} // namespace diffeval::datasets
