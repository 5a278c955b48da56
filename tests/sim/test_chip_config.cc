#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "sim/chip_config.h"

using namespace vtpu::sim;

TEST_SUITE("sim") {
  TEST_CASE("every preset loads and reproduces its published peak") {
    const auto names = preset_names();
    CHECK(names.size() == 5);
    for (const auto& name : names) {
      const ChipConfig c = load_chip(name);
      CHECK(c.name == name);
      CHECK(c.model_peak_flops(c.tensor_cores) == doctest::Approx(c.peak_bf16_flops).epsilon(0.02));
      CHECK(c.mxu_dim % 128 == 0);
    }
    CHECK(load_chip("v6e").mxu_dim == 256);
    CHECK(load_chip("v5e").vmem_bytes == 128u << 20);
  }

  TEST_CASE("every preset number cites a source") {
    for (const auto& name : preset_names()) {
      const auto doc = nlohmann::json::parse(preset_json(name));
      for (const auto& [key, value] : doc.items()) {
        if (key == "name" || key == "description") continue;
        CHECK_MESSAGE(value.at("source").get<std::string>().size() > 10, name, ".", key);
      }
    }
  }

  TEST_CASE("unknown, missing, mistyped and inconsistent fields are errors") {
    auto doc = nlohmann::json::parse(preset_json("v5e"));
    auto with = [&](auto edit) {
      auto copy = doc;
      edit(copy);
      return copy.dump();
    };
    CHECK_THROWS_WITH_AS(parse_chip_json(with([](auto& d) { d["frequency"] = 1; }), "t"),
                         doctest::Contains("unknown field 'frequency'"), ConfigError);
    CHECK_THROWS_WITH_AS(parse_chip_json(with([](auto& d) { d.erase("vmem_bytes"); }), "t"),
                         doctest::Contains("missing field 'vmem_bytes'"), ConfigError);
    CHECK_THROWS_WITH_AS(parse_chip_json(with([](auto& d) { d["mxu_dim"]["value"] = "big"; }), "t"),
                         doctest::Contains("must be a number"), ConfigError);
    CHECK_THROWS_WITH_AS(parse_chip_json(with([](auto& d) { d["mxu_dim"]["value"] = 128.5; }), "t"),
                         doctest::Contains("must be an integer"), ConfigError);
    CHECK_THROWS_WITH_AS(parse_chip_json(with([](auto& d) { d["clock_hz"]["source"] = ""; }), "t"),
                         doctest::Contains("non-empty source"), ConfigError);
    CHECK_THROWS_WITH_AS(parse_chip_json(with([](auto& d) { d["clock_hz"]["value"] = 3e9; }), "t"),
                         doctest::Contains("does not reproduce the published peak"), ConfigError);
    CHECK_THROWS_WITH_AS(parse_chip_json(with([](auto& d) { d["vmem_held_bytes"]["value"] = 100u << 20; }), "t"),
                         doctest::Contains("at most half of vmem_bytes"), ConfigError);
    CHECK_THROWS_WITH_AS(parse_chip_json("{not json", "t"), doctest::Contains("invalid JSON"), ConfigError);
    CHECK_THROWS_WITH_AS(load_chip("v99"), doctest::Contains("unknown chip 'v99'"), ConfigError);
  }
}
