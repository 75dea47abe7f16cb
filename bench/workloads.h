#pragma once
// The benchmark workloads of bench/workloads.csv, parsed without the library so that the GPU
// benchmark, the development harness (nvcc alone) and the tests read the one file the same way.

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "diffattn/status.h"

namespace diffattn::bench {

struct Workload {
  std::string name;
  int batch = 0, heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
};

inline constexpr std::string_view kWorkloadsHeader = "name,batch,heads,seq_q,seq_kv,head_dim";

namespace workloads_detail {

inline std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  for (std::size_t start = 0;;) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

inline bool parse_positive(std::string_view field, int& out) {
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), out);
  return ec == std::errc() && end == field.data() + field.size() && out > 0;
}

inline bool is_blank_or_comment(std::string_view line) {
  const std::size_t first = line.find_first_not_of(" \t");
  return first == std::string_view::npos || line[first] == '#';
}

}  // namespace workloads_detail

// Parses the CSV text: '#' lines and blank lines are skipped, the first other line must be
// kWorkloadsHeader, every following line one workload with positive sizes and a unique name.
// `origin` names the source in error messages.
inline Result<std::vector<Workload>> parse_workloads(std::string_view text, std::string_view origin) {
  using workloads_detail::is_blank_or_comment;
  std::vector<Workload> workloads;
  bool header_seen = false;
  int line_no = 0;
  std::istringstream in{std::string(text)};
  for (std::string raw; std::getline(in, raw);) {
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::string_view line = raw;
    if (is_blank_or_comment(line)) continue;
    const std::string where = std::string(origin) + ":" + std::to_string(line_no) + ": ";
    if (!header_seen) {
      if (line != kWorkloadsHeader)
        return InvalidInput(where + "expected the header '" + std::string(kWorkloadsHeader) + "', got '" + raw + "'");
      header_seen = true;
      continue;
    }
    const auto fields = workloads_detail::split_fields(line);
    if (fields.size() != 6)
      return InvalidInput(where + "expected 6 comma-separated fields (" + std::string(kWorkloadsHeader) + "), got " +
                          std::to_string(fields.size()));
    Workload w;
    w.name = std::string(fields[0]);
    if (w.name.empty()) return InvalidInput(where + "the workload name is empty");
    int* sizes[] = {&w.batch, &w.heads, &w.seq_q, &w.seq_kv, &w.head_dim};
    for (int i = 0; i < 5; ++i)
      if (!workloads_detail::parse_positive(fields[i + 1], *sizes[i]))
        return InvalidInput(where + "field " + std::to_string(i + 2) + " of '" + w.name + "' is '" +
                            std::string(fields[i + 1]) + "'; give a positive integer");
    for (const Workload& seen : workloads)
      if (seen.name == w.name) return InvalidInput(where + "workload '" + w.name + "' is listed twice");
    workloads.push_back(std::move(w));
  }
  if (!header_seen || workloads.empty())
    return InvalidInput(std::string(origin) + ": no workloads; the file needs the header '" +
                        std::string(kWorkloadsHeader) + "' and at least one workload line");
  return workloads;
}

inline Result<std::vector<Workload>> load_workloads(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return InvalidInput("cannot read the workloads file " + path + "; pass --workloads-file PATH");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_workloads(text.str(), path);
}

}  // namespace diffattn::bench
