// Declared production shapes (CheckOptions::shapes, SPEC.md §7 Declared shapes): what `attncheck check --shapes ARG`
// and Python's `check(fn, shapes=…)` take — a preset's name, a JSON file, or JSON text — and the model presets
// shipped as data (gate/data/model_shapes.json, each with its source).
//
// A shapes document is a JSON array (or {"shapes": [...]}) whose entries are preset names or shape objects:
//   ["llama-3-8b",
//    {"name": "my decode", "B": 8, "Hq": 32, "Hkv": 8, "Lq": 1, "Lk": 32768, "D": 128, "causal": false},
//    {"Hq": 16, "Lq": 2048, "Lk": 2048, "D": 256, "causal": true, "window": [1023, 0], "softcap": 50}]
// Keys: Hq, Lq, Lk, D required; B (1), Hkv (Hq), Dv (D), causal (false), window ([left, right], −1 unbounded),
// softcap (c > 0) and name ("shape N") optional.
#pragma once

#include "attncheck/check.h"

#include <string>
#include <string_view>
#include <vector>

namespace attncheck::gate {

/// A model's attention geometry at lengths a check can afford, with the configuration it comes from.
struct ModelPreset {
  std::string name;    ///< "llama-3-8b"
  std::string source;  ///< where its numbers come from
  std::vector<DeclaredShape> shapes;  ///< named "<preset> <use>": prefill, decode, local prefill …
};

/// The presets shipped with attncheck, in the data file's order.
const std::vector<ModelPreset> &model_presets();

/// The shapes `arg` names: a preset's name, JSON text (starting with '[' or '{'), or the path of a JSON file. Throws
/// RunError (kExitUsage, input "shapes") with one line naming the entry and key at fault, or the presets when `arg`
/// is neither a preset nor a readable file.
std::vector<DeclaredShape> declared_shapes(std::string_view arg);

}  // namespace attncheck::gate
