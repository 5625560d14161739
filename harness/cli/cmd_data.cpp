// `diffeval data fetch gsm8k`: download the official GSM8K files into the
// cache and verify them.
#include <harness/cli/commands.hpp>
#include <harness/cli/util.hpp>

#include <datasets/dataset.hpp>
#include <harness/http/client.hpp>

#include <fmt/format.h>

#include <iostream>

namespace diffeval::cli {

void add_data_command(CLI::App& root, Dispatch& dispatch) {
    auto* data = root.add_subcommand("data", "Manage datasets");
    data->require_subcommand(1);
    auto* fetch = data->add_subcommand("fetch", "Download a dataset into the cache");
    auto name = std::make_shared<std::string>();
    auto url_base = std::make_shared<std::string>(datasets::k_gsm8k_url_base);
    fetch->add_option("NAME", *name, "Dataset to fetch (gsm8k)")->required();
    fetch->add_option("--data-url-base", *url_base, "Where to download the files from");
    dispatch[fetch] = [name, url_base] {
        if (*name != "gsm8k") {
            return report(util::make_error(
                util::ErrorKind::usage,
                fmt::format("unknown dataset '{}'; only 'gsm8k' can be fetched", *name)));
        }
        // A URL no download can use is the flag's error, not the network's.
        if (const auto problem = http::http_url_problem(*url_base)) {
            return report(util::make_error(
                util::ErrorKind::usage,
                fmt::format("--data-url-base {} {}; give the http:// or https:// address of a "
                            "directory holding test.jsonl and train.jsonl",
                            http::url_without_secret(*url_base), *problem)));
        }
        std::vector<std::string> log;
        auto dir = datasets::fetch_gsm8k(*url_base, log);
        for (const auto& line : log) {
            std::cout << line << "\n";
        }
        if (!dir) {
            return report(dir.error());
        }
        std::cout << fmt::format("GSM8K is ready in {}\n", dir->string());
        return static_cast<int>(k_exit_ok);
    };
}

} // namespace diffeval::cli
