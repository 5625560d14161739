// Typed readers; see readers.hpp.
#include <harness/store/readers.hpp>

#include <harness/store/sqlite.hpp>

#include <fmt/format.h>

namespace diffeval::store {

using util::ErrorKind;
using util::make_error;

util::Result<std::vector<StopCauseCounts>> unknown_stop_causes(Store& st) {
    Statement s(st.handle(),
                "SELECT server, framing, max_tokens, sum(stop_cause = 'unknown'), count(*) FROM "
                "v_responses WHERE stop_cause IS NOT NULL GROUP BY server, framing, max_tokens "
                "HAVING sum(stop_cause = 'unknown') > 0 ORDER BY server, framing, max_tokens");
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

util::Result<std::vector<GroupCompleteness>> completeness(Store& st) {
    Statement s(st.handle(), "SELECT q.server, q.framing, q.max_tokens, count(*), "
                             "sum(CASE WHEN r.ok = 1 THEN 0 ELSE 1 END) FROM requests q "
                             "LEFT JOIN responses r ON r.response_id = q.response_id "
                             "GROUP BY q.server, q.framing, q.max_tokens ORDER BY "
                             "min(q.request_id)");
    std::vector<GroupCompleteness> out;
    while (s.step()) {
        out.push_back({s.column_text(0), s.column_text(1), static_cast<int>(s.column_int(2)),
                       s.column_int(3), s.column_int(4)});
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read requests: {}", s.error()));
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

util::Result<std::vector<ProbeReading>> probe_readings(Store& st) {
    Statement s(st.handle(), "SELECT probe, server, framing, repeat, question_idx, p_open, "
                             "bounded FROM v_probes WHERE p_open IS NOT NULL "
                             "ORDER BY server, framing, question_idx, repeat");
    if (!s.valid()) {
        return make_error(ErrorKind::data,
                          fmt::format("{} has no probe tables: {}", st.path(), s.error()));
    }
    std::vector<ProbeReading> out;
    while (s.step()) {
        out.push_back({s.column_text(0), s.column_text(1), s.column_text(2),
                       static_cast<int>(s.column_int(3)), static_cast<int>(s.column_int(4)),
                       s.column_double(5), s.column_int(6) != 0});
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
