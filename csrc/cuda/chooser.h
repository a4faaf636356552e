#pragma once
// Which table row runs a problem: the user's override, validated, or the
// chooser's pick with its reason (chooser.cpp: the rules and the evidence
// behind them; changing a rule rebuilds that one file).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launch.h"

namespace tilelab {

struct Choice {
  const KernelConfig* cfg = nullptr;
  std::string reason;
};

// Why row cannot run p on d (the table's columns, then the family's own
// limits), or "" if it can.
std::string cannot_run(const KernelConfig& row, const GemmProblem& p, const DeviceInfo& d);

// The chooser's pick for p on d.
Choice choose(const GemmProblem& p, const DeviceInfo& d);

// The user's (variant, tile) validated against the table and the device, or
// the chooser's pick when both are None (or variant is "auto").
Choice select_kernel(const GemmProblem& p, const DeviceInfo& d, std::optional<std::string_view> variant,
                     std::optional<int64_t> tile);

}  // namespace tilelab
