#pragma once
// Which table row runs a problem: the user's override, validated, or the
// chooser's pick with its reason (chooser.cpp: the rules and the evidence
// behind them; changing a rule rebuilds that one file).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launch.h"
#include "split_reduce.h"

namespace tilelab {

struct Choice {
  const KernelConfig* cfg = nullptr;
  std::string reason;
  int splits = 1;  // slices of K (split-K; 1: none)
  // With splits > 1: how the slices are added (split_reduce_way: in the kernel through global memory, or a second
  // pass over fp32 slabs), decided once with the reason (split_k_gemm goes by it).
  SplitWay reduce = SplitWay::Pass;
};

// Why row cannot run p on d (the table's columns, then the family's own
// limits), or "" if it can.
std::string cannot_run(const KernelConfig& row, const GemmProblem& p, const DeviceInfo& d);

// The chooser's pick for p on d.
Choice choose(const GemmProblem& p, const DeviceInfo& d);

// The user's (variant, tile) validated against the table and the device, or
// the chooser's pick when both are None (or variant is "auto"); then, for a
// row whose family splits K, the split count of least estimated time.
Choice select_kernel(const GemmProblem& p, const DeviceInfo& d, std::optional<std::string_view> variant,
                     std::optional<int64_t> tile);

// The tune cache (tilelab_torch.tune): the row measured fastest for a problem
// (keyed by tune_key in ../tune_key.h), consulted before the rules when no
// variant is forced. A row that cannot run the problem here is ignored.
struct TunedEntry {
  std::string kernel;       // the measured winner (a config name)
  double ms = 0;            // its time
  std::string rule_kernel;  // the rules' pick and its time, for the reason
  double rule_ms = 0;
};
void set_tuned(const std::string& key, TunedEntry entry);
void clear_tuned();
int64_t tuned_size();

// The choice cache (chooser.cpp, ChoiceKey): the rules' pick is kept per problem and device, so a repeated
// product skips the rules. Testing hook (torch.ops.tilelab._set_choice_cache): clears it and turns it on or off;
// returns how many picks it held.
int64_t set_choice_cache(bool enabled);

// Testing hook (torch.ops.tilelab._set_split_k): a positive count forces that
// many K slices (at most one per k-tile) on every row whose family splits K;
// 0 restores the estimate.
void set_split_k_override(int64_t splits);

}  // namespace tilelab
