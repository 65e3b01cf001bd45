// The renderers of the three kinds of report (report.h dispatches to them).
#pragma once

#include <filesystem>

#include "report/report.h"
#include "report/sources.h"

namespace kda::report {

Result<Report> render_run(const std::filesystem::path& dir);
Result<Report> render_eval(const std::filesystem::path& file);
Result<Report> render_tune(const std::filesystem::path& dir);

}  // namespace kda::report
