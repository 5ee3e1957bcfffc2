"""Graph-builder methods of recurrent cells: the elementwise part of an LSTM step
(:mod:`.lstm_cell`), whose nodes the ONNX importer writes when it unrolls an LSTM."""

from __future__ import annotations

from .ir_core import BuilderBase


class RecurrentBuilder(BuilderBase):
    """``lstm_state`` and ``lstm_hidden``."""

    def _gates(self, op: str, gates: str, state: str | None, name: str | None) -> tuple[int, int]:
        """(batch, hidden) of pre-activations ``gates`` (batch, 4 * hidden), checked against
        ``state`` (batch, hidden) where one is given."""
        shape = self.shape(gates)
        if len(shape) != 2 or shape[1] % 4:
            raise self._fail(op, name, f"gates {shape} must be (batch, 4 * hidden)")
        batch, hidden = shape[0], shape[1] // 4
        if state is not None and self.shape(state) != (batch, hidden):
            raise self._fail(op, name, f"state {self.shape(state)} does not fit gates {shape}: "
                                       f"expected {(batch, hidden)}")
        return batch, hidden

    def lstm_state(self, gates: str, previous: str | None = None, *, name: str | None = None) -> str:
        """An LSTM's new cell state sigmoid(f) * previous + sigmoid(i) * tanh(g) from the
        pre-activations ``gates`` (batch, 4 * hidden), gates in ONNX's order i, o, f, g, and the
        previous cell state (batch, hidden); None: a zero state."""
        shape = self._gates("lstm_state", gates, previous, name)
        inputs = (gates,) if previous is None else (gates, previous)
        return self._add("lstm_state", inputs, shape, name)

    def lstm_hidden(self, gates: str, state: str, *, name: str | None = None) -> str:
        """An LSTM's new hidden state sigmoid(o) * tanh(state) from the pre-activations ``gates``
        (batch, 4 * hidden), gates in ONNX's order i, o, f, g, and the new cell state ``state``."""
        shape = self._gates("lstm_hidden", gates, state, name)
        return self._add("lstm_hidden", (gates, state), shape, name)
