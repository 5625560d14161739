// Typed readers; see readers.hpp.
#include <harness/store/readers.hpp>

#include <harness/store/sqlite.hpp>
#include <harness/store/view_sql.hpp>
#include <harness/util/json_text.hpp>
#include <harness/util/text.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <tuple>

namespace diffeval::store {

using util::ErrorKind;
using util::make_error;

util::Result<std::vector<std::string>> servers_named_in(const std::string& path) {
    Database db;
    if (auto r = db.open(path, Database::Create::read_only); !r) {
        return r.error();
    }
    // Both tables are in every schema a diffeval wrote.
    Statement s(db.handle(), "SELECT name FROM servers UNION SELECT server FROM requests");
    if (!s.valid()) {
        return make_error(ErrorKind::data,
                          fmt::format("{} is not a diffeval database ({})", path, s.error()));
    }
    std::vector<std::string> out;
    while (s.step()) {
        out.push_back(s.column_text(0));
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::data, fmt::format("cannot read {}: {}", path, s.error()));
    }
    return out;
}

util::Result<std::vector<StopCauseCounts>> unknown_stop_causes(Store& st) {
    // The counted responses' classifications, read without v_responses:
    // the view also reads each response row (its body's text among them)
    // to learn that it exists, which a classification's foreign key
    // already says: 0.16 s on the official demo's database, in every
    // summary, gate and report, against 0.05 s this way. The requests are
    // read in their table's order, not the group index's, as completeness()
    // reads them.
    Statement s(st.handle(),
                "SELECT q.server, q.framing, q.max_tokens, sum(c.stop_cause = 'unknown'), "
                "count(*) FROM requests q NOT INDEXED JOIN classifications c ON c.response_id = "
                "q.response_id WHERE c.stop_cause IS NOT NULL GROUP BY q.server, q.framing, "
                "q.max_tokens HAVING sum(c.stop_cause = 'unknown') > 0 ORDER BY q.server, "
                "q.framing, q.max_tokens");
    if (!s.valid()) {
        return make_error(ErrorKind::io, fmt::format("cannot read stop causes: {}", s.error()));
    }
    std::vector<StopCauseCounts> out;
    while (s.step()) {
        out.push_back({s.column_text(0), s.column_text(1), static_cast<int>(s.column_int(2)),
                       s.column_int(3), s.column_int(4)});
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read stop causes: {}", s.error()));
    }
    return out;
}

util::Result<std::vector<ServerRecord>> server_records(Store& st,
                                                       const std::vector<std::string>& names) {
    Statement s(st.handle(), "SELECT coalesce(model, ''), coalesce(info_json, ''), facts_json "
                             "FROM servers WHERE name = ?");
    if (!s.valid()) {
        return make_error(ErrorKind::data,
                          fmt::format("cannot read the servers table: {}", s.error()));
    }
    std::vector<ServerRecord> out;
    for (const auto& name : names) {
        ServerRecord r;
        s.bind(name);
        if (s.step()) {
            r.found = true;
            r.model = s.column_text(0);
            r.info_json = s.column_text(1);
            if (!s.column_null(2)) {
                r.facts_json = s.column_text(2);
            }
        }
        out.push_back(std::move(r));
    }
    return out;
}

namespace {

// `counts` as NameCounts: most first, then by name; past k_listed, counted.
NameCounts ranked(const std::map<std::string, int64_t>& counts) {
    std::vector<std::pair<std::string, int64_t>> all(counts.begin(), counts.end());
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    NameCounts out;
    for (auto& [name, n] : all) {
        if (out.listed.size() < NameCounts::k_listed) {
            out.listed.emplace_back(std::move(name), n);
        } else {
            ++out.more_names;
            out.more_responses += n;
        }
    }
    return out;
}

} // namespace

util::Result<std::vector<AnsweredAs>> answered_as(Store& st,
                                                  const std::vector<std::string>& names) {
    // The JSON read is the body (a leading byte-order mark left out, which
    // json_valid refuses), or a stream's first `data:` event from its '{' to
    // the end of its line (comment lines such as ": ping" may come first). A
    // body that is not JSON would stop json_extract with an error: only valid
    // ones are read. Both fields come out of one parse, as a JSON array
    // ["model", "fingerprint"] per distinct pair; only non-empty text counts.
    // The responses are read in their table's order (NOT INDEXED: through
    // the group index, a server's requests sent question by question led
    // to its responses at random; 0.11 s against 0.05 s a server on the
    // official demo's database).
    Statement s(
        st.handle(),
        "SELECT json_extract(j, '$.model', '$.system_fingerprint') AS said, count(*) FROM ("
        "  SELECT CASE WHEN streamed = 0 THEN b"
        "         ELSE substr(e, 1, instr(e || char(10), char(10)) - 1) END AS j FROM ("
        "    SELECT streamed, b, substr(d, instr(d, '{')) AS e FROM ("
        "      SELECT r.streamed,"
        "             CASE WHEN substr(r.response_json, 1, 1) = char(65279)"
        "                  THEN substr(r.response_json, 2) ELSE r.response_json END AS b,"
        "             substr(r.response_json, CASE WHEN substr(r.response_json, 1, 5) = 'data:'"
        "                  THEN 1 ELSE instr(r.response_json, char(10) || 'data:') END) AS d"
        "      FROM requests q NOT INDEXED JOIN responses r ON r.request_id = q.request_id"
        "      WHERE q.server = ? AND r.ok = 1)))"
        "WHERE json_valid(j) GROUP BY said");
    if (!s.valid()) {
        return make_error(ErrorKind::data,
                          fmt::format("cannot read what responses said they were: {}", s.error()));
    }
    std::vector<AnsweredAs> out;
    for (const auto& name : names) {
        std::map<std::string, int64_t> models;
        std::map<std::string, int64_t> fingerprints;
        s.bind(name);
        while (s.step()) {
            // SQLite wrote this array from valid JSON, one element per path
            // (null for a missing field), with the server's bytes in its
            // strings, which need not be UTF-8, and its values as deep as
            // they came (a model nested past the bound is no name).
            auto text = s.column_text(0);
            if (!util::is_utf8(text)) {
                text = util::valid_utf8(text);
            }
            const auto said = util::parse_untrusted_json(text);
            if (!said.is_array() || said.size() != 2) {
                continue;
            }
            const auto add = [&](const nlohmann::json& v, std::map<std::string, int64_t>& into) {
                if (v.is_string() && !v.get_ref<const std::string&>().empty()) {
                    into[v.get<std::string>()] += s.column_int(1);
                }
            };
            add(said[0], models);
            add(said[1], fingerprints);
        }
        if (!s.error().empty()) {
            return make_error(
                ErrorKind::data,
                fmt::format("cannot read what responses said they were: {}", s.error()));
        }
        out.push_back({ranked(models), ranked(fingerprints)});
    }
    return out;
}

// What each run asked of each of its groups, from its stored configuration
// (servers, framings and token limits; repeats; --limit against the
// dataset's stored questions; --shard i/N, shards 0 without one). A framing
// given as a file is known only by the name its rows carry, so one whose
// run planned none of it is left out. Imports store no such configuration.
// Repeats are held to a run's own limit (1,000,000), so a file another
// program wrote cannot make the counts overflow; a configuration that is not
// JSON asks nothing here (json_each refused the whole query), and
// unreadable_run_configs names it.
constexpr std::string_view k_asked_sql = R"(
  SELECT r.run_id, r.status,
         json_extract(s.value, '$.name') AS server,
         f.value AS framing,
         m.value AS max_tokens,
         max(0, min(json_extract(r.config_json, '$.repeats'), 1000000)) AS repeats,
         min(coalesce(json_extract(r.config_json, '$.limit'), 9223372036854775807),
             (SELECT count(*) FROM questions q WHERE q.dataset = r.dataset)) AS n,
         CAST(substr(json_extract(r.config_json, '$.shard'), 1,
                     instr(json_extract(r.config_json, '$.shard'), '/') - 1) AS INTEGER) AS shard,
         CAST(substr(json_extract(r.config_json, '$.shard'),
                     instr(json_extract(r.config_json, '$.shard'), '/') + 1) AS INTEGER) AS shards
  FROM (SELECT run_id, status, dataset,
               CASE WHEN json_valid(config_json) THEN config_json ELSE '{}' END AS config_json
        FROM runs) r,
       json_each(r.config_json, '$.servers') s, json_each(r.config_json, '$.framings') f,
       json_each(r.config_json, '$.max_tokens') m
  WHERE json_valid(r.config_json) AND json_type(r.config_json, '$.repeats') = 'integer'
    AND (instr(f.value, '/') = 0 AND f.value NOT LIKE '%.toml'
         OR EXISTS (SELECT 1 FROM requests x WHERE x.framing = f.value))
)";

// The places (question, repeat) each run asked of each of its groups
// (k_asked_sql), and how many of them hold no request row: a run killed or
// failed while still planning stopped before reaching them; and whether
// every run that left such places ended `failed`.
// `asked` is MATERIALIZED: inlined, SQLite put its expressions in place of
// a.n and a.shards, so the count of the dataset's questions ran again for
// every request row the second count visited (9 s of `summary` on the
// official demo's database; 0.03 s computed once a group).
constexpr std::string_view k_unplanned_sql = R"(
), counted AS (
  SELECT server, framing, max_tokens, status,
         repeats * CASE WHEN shards > 0 THEN n / shards + (shard < n % shards) ELSE n END
         - (SELECT count(*) FROM requests q
            WHERE q.server = a.server AND q.framing = a.framing AND q.max_tokens = a.max_tokens
              AND q.repeat < a.repeats AND q.question_idx < a.n
              AND (coalesce(a.shards, 0) = 0 OR q.question_idx % a.shards = a.shard)) AS unplanned
  FROM asked a
)
SELECT server, framing, max_tokens, max(unplanned),
       min(CASE WHEN unplanned > 0 THEN status = 'failed' END) FROM counted
GROUP BY server, framing, max_tokens HAVING max(unplanned) > 0
)";

namespace {

// One run's ask of one group: its first `n` questions, `repeats` each, of
// shard `shard` of `shards` (0: all of them).
struct Ask {
    int64_t n = 0;
    int64_t repeats = 0;
    int64_t shard = 0;
    int64_t shards = 0;
    bool holds(int64_t q) const { return q < n && (shards <= 0 || q % shards == shard); }
};

// A run of shard i/N asked its part of a whole: N shards of its `n`
// questions and `repeats`. The places of such a whole that no run of the
// group asked (a shard never merged, or shards run with another --limit or
// --repeats), and the shards of N no run of the group is of whose
// questions are among them, as "i/N" (at most `k_shards_named`).
void count_unrun(const std::vector<Ask>& asks, GroupCompleteness& g) {
    constexpr size_t k_shards_named = 10;
    int64_t whole = 0;
    for (const auto& a : asks) {
        if (a.shards > 0) {
            whole = std::max(whole, a.n);
        }
    }
    std::vector<std::pair<int64_t, int64_t>> named; // (shards, shard)
    for (int64_t q = 0; q < whole; ++q) {
        int64_t need = 0, have = 0;
        for (const auto& a : asks) {
            if (a.shards > 0 && q < a.n) {
                need = std::max(need, a.repeats);
            }
            if (a.holds(q)) {
                have = std::max(have, a.repeats);
            }
        }
        if (have >= need) {
            continue;
        }
        g.unrun += need - have;
        for (const auto& a : asks) {
            if (a.shards <= 0 || q >= a.n) {
                continue;
            }
            const std::pair<int64_t, int64_t> mine{a.shards, q % a.shards};
            const bool ran = std::any_of(asks.begin(), asks.end(), [&](const Ask& b) {
                return b.shards == mine.first && b.shard == mine.second;
            });
            if (!ran && std::find(named.begin(), named.end(), mine) == named.end()) {
                named.push_back(mine);
            }
        }
    }
    std::sort(named.begin(), named.end());
    for (const auto& [shards, shard] : named) {
        if (g.missing_shards.size() == k_shards_named) {
            g.missing_shards.push_back(fmt::format("{} more", named.size() - k_shards_named));
            break;
        }
        g.missing_shards.push_back(fmt::format("{}/{}", shard, shards));
    }
}

// Each group's entry of `out`, added (with no requests) when missing.
GroupCompleteness& entry(std::vector<GroupCompleteness>& out, const std::string& server,
                         const std::string& framing, int max_tokens) {
    auto it = std::find_if(out.begin(), out.end(), [&](const GroupCompleteness& o) {
        return o.server == server && o.framing == framing && o.max_tokens == max_tokens;
    });
    if (it != out.end()) {
        return *it;
    }
    out.push_back(GroupCompleteness{server, framing, max_tokens, 0, 0, 0, 0, {}});
    return out.back();
}

} // namespace

util::Result<std::vector<GroupCompleteness>> completeness(Store& st) {
    // The requests in their table's order (NOT INDEXED), so their responses
    // are read about in theirs: through the group index, a run that sends
    // question by question had every response read at random (51,698 page
    // reads and 0.34 s on the official demo's database, 0.07 s so).
    Statement s(st.handle(), "SELECT q.server, q.framing, q.max_tokens, count(*), "
                             "sum(CASE WHEN r.ok = 1 THEN 0 ELSE 1 END), "
                             "sum(r.response_id IS NULL) FROM requests q NOT INDEXED "
                             "LEFT JOIN responses r ON r.response_id = q.response_id "
                             "GROUP BY q.server, q.framing, q.max_tokens ORDER BY "
                             "min(q.request_id)");
    std::vector<GroupCompleteness> out;
    while (s.step()) {
        out.push_back({s.column_text(0),
                       s.column_text(1),
                       static_cast<int>(s.column_int(2)),
                       s.column_int(3),
                       s.column_int(4),
                       0,
                       0,
                       {},
                       s.column_int(5)});
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read requests: {}", s.error()));
    }
    Statement u(st.handle(),
                fmt::format("WITH asked AS MATERIALIZED ({}{}", k_asked_sql, k_unplanned_sql));
    if (!u.valid()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the runs: {}", u.error()));
    }
    while (u.step()) {
        auto& g = entry(out, u.column_text(0), u.column_text(1), static_cast<int>(u.column_int(2)));
        g.unplanned = u.column_int(3);
        g.unplanned_by_failed_runs = u.column_int(4) == 1;
    }
    if (!u.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the runs: {}", u.error()));
    }
    // The shards' wholes, group by group.
    Statement a(st.handle(), fmt::format("SELECT server, framing, max_tokens, repeats, n, "
                                         "coalesce(shard, 0), coalesce(shards, 0) FROM ({}) "
                                         "ORDER BY server, framing, max_tokens",
                                         k_asked_sql));
    if (!a.valid()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the runs: {}", a.error()));
    }
    std::tuple<std::string, std::string, int> group;
    std::vector<Ask> asks;
    const auto flush = [&] {
        if (std::any_of(asks.begin(), asks.end(), [](const Ask& x) { return x.shards > 0; })) {
            GroupCompleteness probe{
                std::get<0>(group), std::get<1>(group), std::get<2>(group), 0, 0, 0, 0, {}};
            count_unrun(asks, probe);
            if (probe.unrun > 0) {
                auto& g = entry(out, probe.server, probe.framing, probe.max_tokens);
                g.unrun = probe.unrun;
                g.missing_shards = std::move(probe.missing_shards);
            }
        }
        asks.clear();
    };
    while (a.step()) {
        std::tuple<std::string, std::string, int> now{a.column_text(0), a.column_text(1),
                                                      static_cast<int>(a.column_int(2))};
        if (now != group) {
            flush();
            group = std::move(now);
        }
        asks.push_back({a.column_int(4), a.column_int(3), a.column_int(5), a.column_int(6)});
    }
    flush();
    if (!a.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the runs: {}", a.error()));
    }
    return out;
}

util::Result<std::vector<std::pair<std::string, int64_t>>> failure_kinds(Store& st) {
    Statement s(st.handle(), "SELECT coalesce(r.error_kind, 'not sent'), count(*) FROM "
                             "requests q LEFT JOIN responses r ON r.response_id = q.response_id "
                             "WHERE r.ok IS NOT 1 GROUP BY 1 ORDER BY 2 DESC, 1");
    std::vector<std::pair<std::string, int64_t>> out;
    while (s.step()) {
        out.emplace_back(s.column_text(0), s.column_int(1));
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read responses: {}", s.error()));
    }
    return out;
}

util::Result<int64_t> runs_marked_running(Store& st) {
    Statement s(st.handle(), "SELECT count(*) FROM runs WHERE status = 'running'");
    if (!s.step()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the runs: {}", s.error()));
    }
    return s.column_int(0);
}

util::Result<std::vector<int64_t>> unreadable_run_configs(Store& st) {
    Statement s(st.handle(),
                "SELECT run_id FROM runs WHERE NOT CASE WHEN json_valid(config_json) THEN "
                "coalesce(json_type(config_json) = 'object' AND (json_type(config_json, "
                "'$.import') = "
                "'text' OR (json_type(config_json, '$.servers') = 'array' AND "
                "json_type(config_json, '$.framings') = 'array' AND "
                "json_type(config_json, '$.max_tokens') = 'array' AND "
                "json_type(config_json, '$.repeats') = 'integer' AND "
                "json_extract(config_json, '$.repeats') >= 1 AND "
                "coalesce(json_type(config_json, '$.limit'), 'null') IN ('null', 'integer') AND "
                "coalesce(json_extract(config_json, '$.limit'), 1) >= 1 AND "
                "coalesce(json_type(config_json, '$.shard'), 'null') IN ('null', 'text'))), 0) "
                "ELSE 0 END "
                "ORDER BY run_id");
    std::vector<int64_t> out;
    while (s.step()) {
        out.push_back(s.column_int(0));
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the runs: {}", s.error()));
    }
    return out;
}

util::Result<bool> other_run_stopped_early(Store& st, int64_t run_id) {
    Statement s(st.handle(), "SELECT 1 FROM runs WHERE run_id <> ? AND status IN "
                             "('interrupted', 'killed', 'failed', 'running') LIMIT 1");
    const bool found = s.bind(run_id).step();
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the runs: {}", s.error()));
    }
    return found;
}

util::Result<int64_t> dataset_questions(Store& st, const std::string& dataset) {
    Statement s(st.handle(), "SELECT count(*) FROM questions WHERE dataset = ?");
    const bool found = s.bind(dataset).step();
    if (!found || !s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the questions: {}", s.error()));
    }
    return s.column_int(0);
}

util::Result<std::vector<std::string>> empty_shard_runs(Store& st) {
    Statement s(st.handle(),
                "SELECT DISTINCT json_extract(config_json, '$.shard') FROM runs WHERE status = "
                "'complete' AND json_valid(config_json) AND "
                "json_type(config_json, '$.shard') = 'text' ORDER BY run_id");
    std::vector<std::string> out;
    while (s.step()) {
        out.push_back(s.column_text(0));
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read the runs: {}", s.error()));
    }
    return out;
}

util::Result<std::vector<ProbeReading>> probe_readings(Store& st) {
    // Each reading's question by its content hash, so analysis pairs two
    // servers' questions as it pairs their answers.
    Statement s(st.handle(),
                fmt::format("SELECT v.probe, v.server, v.framing, v.repeat, v.question_idx, "
                            "v.p_open, v.bounded, v.dataset, coalesce(qs.question_sha256, '') "
                            "FROM ({}) v "
                            "LEFT JOIN questions qs ON qs.dataset = v.dataset AND "
                            "qs.question_idx = v.question_idx WHERE v.p_open IS NOT NULL "
                            "ORDER BY v.server, v.framing, v.question_idx, v.repeat",
                            k_probes_select));
    if (!s.valid()) {
        return make_error(ErrorKind::data,
                          fmt::format("{} has no probe tables: {}", st.path(), s.error()));
    }
    std::vector<ProbeReading> out;
    while (s.step()) {
        out.push_back({s.column_text(0), s.column_text(1), s.column_text(2),
                       static_cast<int>(s.column_int(3)), static_cast<int>(s.column_int(4)),
                       s.column_double(5), s.column_int(6) != 0, s.column_text(7),
                       s.column_text(8)});
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read probes: {}", s.error()));
    }
    return out;
}

util::Result<std::vector<std::pair<std::string, int64_t>>> probes_without_logprobs(Store& st) {
    Statement s(st.handle(),
                "SELECT q.server, count(*) FROM probe_requests q JOIN probe_responses r "
                "ON r.response_id = q.response_id WHERE r.error_kind = 'no-logprobs' "
                "GROUP BY q.server ORDER BY q.server");
    std::vector<std::pair<std::string, int64_t>> out;
    while (s.step()) {
        out.emplace_back(s.column_text(0), s.column_int(1));
    }
    return out;
}

util::Result<std::vector<std::pair<std::string, int64_t>>> probes_unanswered(Store& st) {
    Statement s(st.handle(),
                "SELECT q.server, count(*) FROM probe_requests q LEFT JOIN probe_responses r "
                "ON r.response_id = q.response_id WHERE r.ok IS NOT 1 "
                "GROUP BY q.server ORDER BY q.server");
    std::vector<std::pair<std::string, int64_t>> out;
    while (s.step()) {
        out.emplace_back(s.column_text(0), s.column_int(1));
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read probes: {}", s.error()));
    }
    return out;
}

util::Result<void> for_each_asked_question(Store& st, const QuestionVisitor& visit) {
    Statement s(st.handle(), "SELECT question_idx, question, answer FROM questions WHERE "
                             "(dataset, question_idx) IN (SELECT DISTINCT dataset, question_idx "
                             "FROM requests WHERE response_id IS NOT NULL) ORDER BY question_idx");
    if (!s.valid()) {
        return make_error(ErrorKind::data, fmt::format("cannot read questions: {}", s.error()));
    }
    while (s.step()) {
        visit(s.column_int(0), s.column_view(1), s.column_view(2));
    }
    return {};
}

} // namespace diffeval::store
