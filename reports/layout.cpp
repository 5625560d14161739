// Report layouts; see layout.hpp.
#include <reports/layout.hpp>

#include <harness/util/embedded.hpp>
#include <harness/util/file.hpp>
#include <harness/util/toml_json.hpp>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace diffeval::reports {

namespace {

using util::ErrorKind;
using util::make_error;

using util::check_known_keys;
using util::toml_where;

util::Result<ReportLayout::ComparisonSpec> comparison(const toml::node& node,
                                                      const std::string& origin) {
    const auto* t = node.as_table();
    if (!t) {
        return make_error(ErrorKind::usage, fmt::format("{}: each [[comparisons]] must be a table",
                                                        toml_where(origin, node)));
    }
    if (auto r = check_known_keys(*t, {"scorer", "framing", "required"}, origin, "[[comparisons]]");
        !r) {
        return r.error();
    }
    ReportLayout::ComparisonSpec spec;
    auto scorer = (*t)["scorer"].value<std::string>();
    if (!scorer || scorer->empty()) {
        return make_error(ErrorKind::usage, fmt::format("{}: a comparison needs a scorer name",
                                                        toml_where(origin, node)));
    }
    spec.scorer = *scorer;
    if (const auto* f = t->get("framing")) {
        auto framing = f->value<std::string>();
        if (!framing || framing->empty()) {
            return make_error(
                ErrorKind::usage,
                fmt::format("{}: 'framing' must be a framing's name", toml_where(origin, *f)));
        }
        spec.framing = *framing;
    }
    if (const auto* r = t->get("required")) {
        auto required = r->value<bool>();
        if (!required) {
            return make_error(ErrorKind::usage, fmt::format("{}: 'required' must be true or false",
                                                            toml_where(origin, *r)));
        }
        spec.required = *required;
    }
    return spec;
}

} // namespace

util::Result<ReportLayout> load_layout(const std::string& path) {
    std::string origin = path.empty() ? "reports/layout.toml" : path;
    std::string text;
    if (path.empty()) {
        text = std::string(*util::embedded_file("reports/layout.toml"));
    } else {
        auto read = util::read_input(path, util::k_max_config_bytes);
        if (!read) {
            return make_error(
                ErrorKind::usage,
                fmt::format("cannot read layout file {}; check the path", read.error().message));
        }
        text = std::move(*read);
    }
    auto parsed = util::parse_toml(text, origin);
    if (!parsed) {
        return parsed.error();
    }
    const toml::table& tbl = *parsed;
    if (auto r =
            check_known_keys(tbl, {"version", "lead_scorer", "comparisons"}, origin, "layout file");
        !r) {
        return r.error();
    }
    if (const auto* v = tbl.get("version"); !v || util::toml_integer(*v) != 1) {
        return make_error(ErrorKind::usage, fmt::format("{}: 'version = 1' is required", origin));
    }
    ReportLayout layout;
    auto lead = tbl["lead_scorer"].value<std::string>();
    if (!lead || lead->empty()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: 'lead_scorer' (a scorer's name) is required", origin));
    }
    layout.lead_scorer = *lead;
    const auto* list = tbl["comparisons"].as_array();
    if (!list || list->empty()) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}: at least one [[comparisons]] is required", origin));
    }
    // A comparison as the repeat refusal names it.
    const auto named = [](const ReportLayout::ComparisonSpec& c) {
        return fmt::format("{} on {}", c.scorer,
                           c.framing ? "framing " + *c.framing : "every framing");
    };
    for (const auto& node : *list) {
        auto spec = comparison(node, origin);
        if (!spec) {
            return spec.error();
        }
        // A comparison another one already makes would count twice: in the
        // headline's verdicts, the table and the Holm family, every p larger.
        for (const auto& earlier : layout.comparisons) {
            if (earlier.scorer == spec->scorer &&
                (!earlier.framing || !spec->framing || *earlier.framing == *spec->framing)) {
                return make_error(ErrorKind::usage,
                                  fmt::format("{}: this comparison ({}) repeats one listed before "
                                              "it ({}), and would be counted twice; remove one",
                                              toml_where(origin, node), named(*spec),
                                              named(earlier)));
            }
        }
        layout.comparisons.push_back(std::move(*spec));
    }
    return layout;
}

} // namespace diffeval::reports
