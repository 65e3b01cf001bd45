#include "ncu/report_reader.h"

#include <string>

#include "ncu/metric_units.h"
#include "ncu/native_source.h"
#include "ncu/wire.h"
#include "util/fs.h"

namespace kda::ncu {

namespace {

// Field numbers (see docs/ncu-format.md).
namespace block_header {
constexpr uint32_t kNumSources = 1, kNumResults = 2, kSessionDetails = 3, kStringTable = 4, kPayloadSize = 5,
                   kProcess = 6;
}
namespace result_field {
constexpr uint32_t kMangledName = 5, kFunctionName = 6, kDemangledName = 7, kGridSize = 10, kBlockSize = 11,
                   kMetricResults = 13, kSource = 15, kRuleResults = 19, kContextId = 22, kStreamId = 23,
                   kClockStatus = 25;
}

// Iterates a message, calling fn(field) for each; propagates decoder errors and fn's errors.
template <typename Fn>
Status for_each_field(std::string_view message, Fn&& fn) {
  WireReader reader(message);
  WireField f;
  while (true) {
    KDA_ASSIGN_OR_RETURN(bool more, reader.next(&f));
    if (!more) return Status::ok_status();
    KDA_RETURN_IF_ERROR(fn(f));
  }
}

Status expect(const WireField& f, WireType t, const char* what) {
  if (f.type == t) return Status::ok_status();
  return Status::bad_input(std::string(what) + ": field " + std::to_string(f.number) + " has an unexpected wire type");
}

Result<Value> decode_value(std::string_view message) {
  Value v;
  KDA_RETURN_IF_ERROR(for_each_field(message, [&](const WireField& f) -> Status {
    switch (f.number) {
      case 1:
        KDA_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "metric value"));
        v = Value::of_string(std::string(f.bytes));
        break;
      case 2:
        KDA_RETURN_IF_ERROR(expect(f, WireType::kFixed32, "metric value"));
        v = Value::of_float(f.as_float());
        break;
      case 3:
        KDA_RETURN_IF_ERROR(expect(f, WireType::kFixed64, "metric value"));
        v = Value::of_double(f.as_double());
        break;
      case 4:
        KDA_RETURN_IF_ERROR(expect(f, WireType::kVarint, "metric value"));
        v = Value::of_uint(static_cast<uint32_t>(f.scalar), false);
        break;
      case 5:
        KDA_RETURN_IF_ERROR(expect(f, WireType::kVarint, "metric value"));
        v = Value::of_uint(f.scalar);
        break;
      default: break;  // unknown fields are tolerated
    }
    return Status::ok_status();
  }));
  return v;
}

Result<Dim3> decode_dim3(std::string_view message) {
  Dim3 d;
  KDA_RETURN_IF_ERROR(for_each_field(message, [&](const WireField& f) -> Status {
    if (f.type != WireType::kVarint) return Status::ok_status();
    if (f.number == 1) d.x = f.scalar;
    if (f.number == 2) d.y = f.scalar;
    if (f.number == 3) d.z = f.scalar;
    return Status::ok_status();
  }));
  return d;
}

Result<Metric> decode_metric(std::string_view message, const std::vector<std::string>& strings) {
  Metric m;
  bool named = false;
  KDA_RETURN_IF_ERROR(for_each_field(message, [&](const WireField& f) -> Status {
    switch (f.number) {
      case 1:
        KDA_RETURN_IF_ERROR(expect(f, WireType::kVarint, "metric name id"));
        if (f.scalar >= strings.size())
          return Status::bad_input("metric name id " + std::to_string(f.scalar) + " is outside the string table (" +
                                   std::to_string(strings.size()) + " strings)");
        m.name = strings[f.scalar];
        named = true;
        break;
      case 2: {
        KDA_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "metric value"));
        KDA_ASSIGN_OR_RETURN(m.value, decode_value(f.bytes));
        break;
      }
      case 3: {
        KDA_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "metric instance"));
        Instance inst;
        KDA_RETURN_IF_ERROR(for_each_field(f.bytes, [&](const WireField& g) -> Status {
          if (g.type != WireType::kLengthDelimited) return Status::ok_status();
          if (g.number == 1) {
            KDA_ASSIGN_OR_RETURN(inst.correlation, decode_value(g.bytes));
          }
          if (g.number == 2) {
            KDA_ASSIGN_OR_RETURN(inst.value, decode_value(g.bytes));
          }
          return Status::ok_status();
        }));
        m.instances.push_back(std::move(inst));
        break;
      }
      case 4:
        if (f.type == WireType::kVarint) m.category = static_cast<int>(f.scalar);
        break;
      default: break;
    }
    return Status::ok_status();
  }));
  if (!named) return Status::bad_input("metric result without a name id");
  m.unit = infer_unit(m.name);
  return m;
}

Result<RuleResult> decode_rule(std::string_view message) {
  RuleResult rule;
  KDA_RETURN_IF_ERROR(for_each_field(message, [&](const WireField& f) -> Status {
    if (f.type != WireType::kLengthDelimited) return Status::ok_status();
    switch (f.number) {
      case 1: rule.id = std::string(f.bytes); break;
      case 2: rule.display_name = std::string(f.bytes); break;
      case 4: rule.section = std::string(f.bytes); break;
      case 3:  // body: repeated items; a speedup or focus metric belongs to the message before it
        return for_each_field(f.bytes, [&](const WireField& item) -> Status {
          if (item.number != 1 || item.type != WireType::kLengthDelimited) return Status::ok_status();
          return for_each_field(item.bytes, [&](const WireField& part) -> Status {
            if (part.type != WireType::kLengthDelimited) return Status::ok_status();
            if (part.number == 1) {
              RuleMessage msg;
              KDA_RETURN_IF_ERROR(for_each_field(part.bytes, [&](const WireField& g) -> Status {
                if (g.number == 1 && g.type == WireType::kLengthDelimited) msg.text = std::string(g.bytes);
                if (g.number == 2 && g.type == WireType::kVarint && g.scalar <= 4)
                  msg.type = static_cast<MessageType>(g.scalar);
                if (g.number == 4 && g.type == WireType::kLengthDelimited) msg.title = std::string(g.bytes);
                return Status::ok_status();
              }));
              rule.messages.push_back(std::move(msg));
            } else if (part.number == 10 && !rule.messages.empty()) {
              auto& msg = rule.messages.back();
              KDA_RETURN_IF_ERROR(for_each_field(part.bytes, [&](const WireField& g) -> Status {
                if (g.number == 1 && g.type == WireType::kVarint)
                  msg.speedup_type = g.scalar == 1 ? "local" : g.scalar == 2 ? "global" : "";
                if (g.number == 2 && g.type == WireType::kFixed64) msg.speedup_pct = g.as_double();
                return Status::ok_status();
              }));
            } else if (part.number == 8 && !rule.messages.empty()) {
              std::string name;
              double value = 0;
              KDA_RETURN_IF_ERROR(for_each_field(part.bytes, [&](const WireField& g) -> Status {
                if (g.number == 2 && g.type == WireType::kLengthDelimited) name = std::string(g.bytes);
                if (g.number == 3 && g.type == WireType::kFixed64) value = g.as_double();
                return Status::ok_status();
              }));
              if (!name.empty()) rule.messages.back().focus_metrics.emplace_back(std::move(name), value);
            }
            return Status::ok_status();
          });
        });
      case 5: {
        SourceMarker mk;
        KDA_RETURN_IF_ERROR(for_each_field(f.bytes, [&](const WireField& g) -> Status {
          if (g.type == WireType::kVarint) {
            if (g.number == 1) mk.kind = static_cast<int>(g.scalar);
            if (g.number == 2) mk.line = static_cast<int>(g.scalar);
            if (g.number == 3) mk.address = g.scalar;
          } else if (g.type == WireType::kLengthDelimited) {
            if (g.number == 4) mk.tooltip = std::string(g.bytes);
            if (g.number == 6) mk.file = std::string(g.bytes);
          }
          return Status::ok_status();
        }));
        rule.markers.push_back(std::move(mk));
        break;
      }
      default: break;
    }
    return Status::ok_status();
  }));
  return rule;
}

Result<KernelResult> decode_result(std::string_view message, const std::vector<std::string>& strings) {
  KernelResult k;
  KDA_RETURN_IF_ERROR(for_each_field(message, [&](const WireField& f) -> Status {
    using namespace result_field;
    if (f.type == WireType::kVarint) {
      if (f.number == kContextId) k.context_id = f.scalar;
      if (f.number == kStreamId) k.stream_id = f.scalar;
      return Status::ok_status();
    }
    if (f.type != WireType::kLengthDelimited) return Status::ok_status();
    switch (f.number) {
      case kMangledName: k.mangled_name = std::string(f.bytes); break;
      case kFunctionName: k.function_name = std::string(f.bytes); break;
      case kDemangledName: k.name = std::string(f.bytes); break;
      case kGridSize: {
        KDA_ASSIGN_OR_RETURN(k.grid, decode_dim3(f.bytes));
        break;
      }
      case kBlockSize: {
        KDA_ASSIGN_OR_RETURN(k.block, decode_dim3(f.bytes));
        break;
      }
      case kMetricResults: {
        auto m = decode_metric(f.bytes, strings);
        if (!m.ok()) return m.status().with_context("metric result " + std::to_string(k.metrics.size()));
        k.metrics.push_back(std::move(m).value());
        break;
      }
      case kRuleResults: {
        auto r = decode_rule(f.bytes);
        if (!r.ok()) return r.status().with_context("rule result " + std::to_string(k.rules.size()));
        k.rules.push_back(std::move(r).value());
        break;
      }
      case kSource:
        return for_each_field(f.bytes, [&](const WireField& g) -> Status {
          if (g.number == 1 && g.type == WireType::kVarint) k.source_reference = g.scalar;
          return Status::ok_status();
        });
      case kClockStatus:
        return for_each_field(f.bytes, [&](const WireField& g) -> Status {
          if (g.number == 2 && g.type == WireType::kVarint) k.clock_locked = g.scalar != 0;
          return Status::ok_status();
        });
      default: break;
    }
    return Status::ok_status();
  }));
  if (k.name.empty()) k.name = !k.function_name.empty() ? k.function_name : k.mangled_name;
  k.reindex();
  return k;
}

Status decode_source(std::string_view message, Report* report) {
  uint64_t reference = 0;
  std::string_view binary;
  std::vector<FunctionLoad> loads;
  KDA_RETURN_IF_ERROR(for_each_field(message, [&](const WireField& f) -> Status {
    if (f.number == 1 && f.type == WireType::kVarint) reference = f.scalar;
    if (f.type != WireType::kLengthDelimited) return Status::ok_status();
    if (f.number == 4) {
      report->cubin_bytes += f.bytes.size();
      binary = f.bytes;
    }
    if (f.number == 9) {  // RelocationData: repeated {function name = 1, load address = 2}
      return for_each_field(f.bytes, [&](const WireField& entry) -> Status {
        if (entry.number != 1 || entry.type != WireType::kLengthDelimited) return Status::ok_status();
        FunctionLoad load;
        bool has_address = false;
        KDA_RETURN_IF_ERROR(for_each_field(entry.bytes, [&](const WireField& g) -> Status {
          if (g.number == 1 && g.type == WireType::kLengthDelimited) load.function = std::string(g.bytes);
          if (g.number == 2 && g.type == WireType::kVarint) {
            load.address = g.scalar;
            has_address = true;
          }
          return Status::ok_status();
        }));
        if (has_address && !load.function.empty()) loads.push_back(std::move(load));
        return Status::ok_status();
      });
    }
    if (f.number != 8) return Status::ok_status();
    return for_each_field(f.bytes, [&](const WireField& files) -> Status {
      if (files.number != 1 || files.type != WireType::kLengthDelimited) return Status::ok_status();
      SourceFile file;
      KDA_RETURN_IF_ERROR(for_each_field(files.bytes, [&](const WireField& g) -> Status {
        if (g.type != WireType::kLengthDelimited) return Status::ok_status();
        if (g.number == 1) file.path = std::string(g.bytes);
        if (g.number == 2) file.content = std::string(g.bytes);
        return Status::ok_status();
      }));
      report->source_files.push_back(std::move(file));
      return Status::ok_status();
    });
  }));
  // A SourceData holding only a Reference and RelocationData adds load addresses to an earlier cubin.
  if (!binary.empty()) report->cubins.push_back({reference, std::string(binary)});
  for (auto& l : loads) {
    l.reference = reference;
    report->function_loads.push_back(std::move(l));
  }
  return Status::ok_status();
}

Status decode_session(std::string_view message, Report* report) {
  return for_each_field(message, [&](const WireField& f) -> Status {
    if (f.type != WireType::kLengthDelimited) return Status::ok_status();
    if (f.number == 11) report->command_lines.emplace_back(f.bytes);
    if (f.number == 8) {
      std::pair<std::string, std::string> v;
      KDA_RETURN_IF_ERROR(for_each_field(f.bytes, [&](const WireField& g) -> Status {
        if (g.type != WireType::kLengthDelimited) return Status::ok_status();
        if (g.number == 1) v.first = std::string(g.bytes);
        if (g.number == 2) v.second = std::string(g.bytes);
        return Status::ok_status();
      }));
      report->versions.push_back(std::move(v));
    }
    return Status::ok_status();
  });
}

// Reads one length-prefixed message (uint32 LE size, then the bytes) from data at *pos.
Result<std::string_view> take_prefixed(std::string_view data, size_t* pos, const char* what) {
  if (data.size() - *pos < 4)
    return Status::bad_input(std::string("truncated size of ") + what + " at byte " + std::to_string(*pos));
  uint32_t n = load_le32(data, *pos);
  if (n > data.size() - *pos - 4)
    return Status::bad_input(std::string(what) + " at byte " + std::to_string(*pos) + " claims " + std::to_string(n) +
                             " bytes, past the end");
  std::string_view out = data.substr(*pos + 4, n);
  *pos += 4 + static_cast<size_t>(n);
  return out;
}

}  // namespace

bool looks_like_ncu_rep(std::string_view bytes) {
  return bytes.size() >= 4 && bytes.substr(0, 4) == std::string_view("NVR\0", 4);
}

Result<Report> parse_ncu_rep(std::string_view bytes) {
  if (!looks_like_ncu_rep(bytes)) return Status::bad_input("not an .ncu-rep file (no NVR magic)");
  Report report;
  report.origin = "ncu-rep";
  size_t pos = 4;
  KDA_ASSIGN_OR_RETURN(std::string_view file_header, take_prefixed(bytes, &pos, "file header"));
  KDA_RETURN_IF_ERROR(for_each_field(file_header, [&](const WireField& f) -> Status {
    if (f.number == 1 && f.type == WireType::kVarint) report.version = static_cast<int>(f.scalar);
    return Status::ok_status();
  }));
  if (report.version != kSupportedReportVersion)
    return Status::bad_input("report version " + std::to_string(report.version) + " is not supported (expected " +
                             std::to_string(kSupportedReportVersion) + ")");
  uint64_t process_id = 0;  // from the latest block header that names a process
  for (int block = 0; pos < bytes.size(); ++block) {
    auto ctx = [&](const Status& s) { return s.with_context("block " + std::to_string(block)); };
    auto header = take_prefixed(bytes, &pos, "block header");
    if (!header.ok()) return ctx(header.status());
    uint64_t num_sources = 0, num_results = 0, payload_size = 0;
    Status st = for_each_field(*header, [&](const WireField& f) -> Status {
      using namespace block_header;
      if (f.type == WireType::kVarint) {
        if (f.number == kNumSources) num_sources = f.scalar;
        if (f.number == kNumResults) num_results = f.scalar;
        if (f.number == kPayloadSize) payload_size = f.scalar;
      } else if (f.type == WireType::kLengthDelimited) {
        if (f.number == kStringTable) {
          return for_each_field(f.bytes, [&](const WireField& s) -> Status {
            if (s.number == 1 && s.type == WireType::kLengthDelimited) report.string_table.emplace_back(s.bytes);
            return Status::ok_status();
          });
        }
        if (f.number == kSessionDetails) return decode_session(f.bytes, &report);
        if (f.number == kProcess) {
          return for_each_field(f.bytes, [&](const WireField& g) -> Status {
            if (g.number == 1 && g.type == WireType::kVarint) process_id = g.scalar;
            return Status::ok_status();
          });
        }
      }
      return Status::ok_status();
    });
    if (!st.ok()) return ctx(st);
    if (payload_size > bytes.size() - pos)
      return ctx(
          Status::bad_input("payload of " + std::to_string(payload_size) + " bytes runs past the end of the file"));
    std::string_view payload = bytes.substr(pos, static_cast<size_t>(payload_size));
    pos += static_cast<size_t>(payload_size);
    // Each entry needs at least its 4-byte size, which bounds hostile counts.
    if (num_sources > payload.size() / 4 || num_results > payload.size() / 4 ||
        num_sources + num_results > payload.size() / 4)
      return ctx(Status::bad_input("entry counts exceed the payload size"));
    size_t ppos = 0;
    for (uint64_t i = 0; i < num_sources; ++i) {
      auto src = take_prefixed(payload, &ppos, "source data");
      if (!src.ok()) return ctx(src.status());
      st = decode_source(*src, &report);
      if (!st.ok()) return ctx(st.with_context("source " + std::to_string(i)));
    }
    for (uint64_t i = 0; i < num_results; ++i) {
      auto msg = take_prefixed(payload, &ppos, "profile result");
      if (!msg.ok()) return ctx(msg.status());
      auto k = decode_result(*msg, report.string_table);
      if (!k.ok()) return ctx(k.status().with_context("result " + std::to_string(report.kernels.size())));
      k->id = static_cast<int>(report.kernels.size());
      k->process_id = process_id;
      report.kernels.push_back(std::move(k).value());
    }
  }
  attach_native_lines(report);
  return report;
}

Result<Report> read_ncu_rep(const std::filesystem::path& path) {
  KDA_ASSIGN_OR_RETURN(std::string bytes, fs::read_file(path));
  auto r = parse_ncu_rep(bytes);
  if (!r.ok()) return r.status().with_context(path.string());
  return r;
}

}  // namespace kda::ncu
