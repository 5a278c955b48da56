// Why a generated kernel trapped: the number its `trap` instruction carries, which the simulator
// reports as sim::SimError::trap_code(). One list for the generators that trap and for the
// bridge, which turns each into the Python error a user can act on.
#pragma once

namespace vtpu::kernels {

enum class TrapCode : int {
  ShapeOutsideProgram = 1,  // a launch's sizes past what the program was generated for (matmul)
  IndexOutOfRange = 2,      // an index read on the chip outside [0, table rows) (gather, scatter-add)
  Int64OutOfRange = 3,      // an int64 value outside the bound its int32 narrowing was given, or a
                            // high word that is not the low word's sign extension
  ChunkNotTiled = 4,        // a reducing collective's chunk that is not a whole number of its tiles
};

constexpr int trap_number(TrapCode code) { return static_cast<int>(code); }

}  // namespace vtpu::kernels
