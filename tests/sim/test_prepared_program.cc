// Programs are checked and decoded once per distinct content: equal programs (even separate
// objects) share one prepared form, a changed one is prepared afresh, and a bad one is refused on
// every launch, never cached.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "isa/assembler.h"
#include "sim/chip_config.h"
#include "sim/prepared_program.h"
#include "sim/sim_error.h"

using namespace vtpu;

TEST_SUITE("sim") {
  TEST_CASE("prepared programs are shared by content and rebuilt when the content changes") {
    const auto chip = sim::load_chip("v5e");
    sim::PreparedPrograms cache;
    const isa::Program a = isa::assemble(".name p\n  sli s1, 3\n  halt\n");
    const isa::Program same = isa::assemble(".name p\n  sli s1, 3\n  halt\n");
    isa::Program changed = a;
    changed.code[0] = isa::assemble("  sli s1, 4\n  halt\n").code[0];
    const sim::PreparedProgram& first = cache.get(a, chip);
    CHECK(first.code.size() == 2);
    CHECK(&cache.get(same, chip) == &first);
    const sim::PreparedProgram& other = cache.get(changed, chip);
    CHECK(&other != &first);
    CHECK(other.code[0].operands[1] == 4);
  }

  TEST_CASE("a program the chip cannot run is refused at every launch, and a full cache starts over") {
    const auto chip = sim::load_chip("v5e");
    sim::PreparedPrograms cache(2);
    const isa::Program wide = isa::assemble(".name wide\n.mxu_dim 256\n  halt\n");
    for (int i = 0; i < 2; ++i) {
      CHECK_THROWS_WITH_AS(cache.get(wide, chip), doctest::Contains("generated for 256-wide MXUs"), sim::SimError);
    }
    for (int n = 0; n < 5; ++n) {
      const isa::Program p = isa::assemble(fmt::format("  sli s1, {}\n  halt\n", n));
      CHECK(cache.get(p, chip).code.size() == 2);
    }
  }
}
