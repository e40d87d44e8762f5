# The MNIST MLP training step that nx_vulkan is measured on, shared by the benchmark
# (examples/mnist_mlp_step_bench.exs) and the determinism test. Plain Nx, no Axon:
# {batch, 1, 28, 28} -> flatten -> dense 128 -> relu -> dense 10 -> log-softmax (stable) ->
# categorical cross-entropy against one-hot labels -> mean. One step is value_and_grad of the
# loss with respect to the four parameters.
defmodule MNISTMLP do
  import Nx.Defn

  defn loss({w1, b1, w2, b2}, x, labels) do
    batch = Nx.axis_size(x, 0)
    h = x |> Nx.reshape({batch, :auto}) |> Nx.dot(w1) |> Nx.add(b1) |> Nx.max(0)
    logits = h |> Nx.dot(w2) |> Nx.add(b2)
    shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
    log_probs = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
    -Nx.mean(Nx.sum(labels * log_probs, axes: [1]))
  end

  @doc "Class probabilities of a batch (inference: the forward pass and a softmax)."
  defn predict({w1, b1, w2, b2}, x) do
    batch = Nx.axis_size(x, 0)
    h = x |> Nx.reshape({batch, :auto}) |> Nx.dot(w1) |> Nx.add(b1) |> Nx.max(0)
    logits = h |> Nx.dot(w2) |> Nx.add(b2)
    shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
    exp = Nx.exp(shifted)
    exp / Nx.sum(exp, axes: [1], keep_axes: true)
  end

  defn step(params, x, labels) do
    value_and_grad(params, &loss(&1, x, labels))
  end

  defn sgd({w1, b1, w2, b2}, {g1, gb1, g2, gb2}, lr) do
    {w1 - lr * g1, b1 - lr * gb1, w2 - lr * g2, b2 - lr * gb2}
  end

  @doc """
  Deterministic inputs: parameters scaled like Glorot-uniform, pixels in [0, 1), one-hot labels
  (i mod classes). `shape` is {batch, features, hidden, classes}. Built on `backend`.
  """
  def inputs({batch, features, hidden, classes}, backend) do
    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      key = Nx.Random.key(42)
      {w1, key} = Nx.Random.uniform(key, -1.0, 1.0, shape: {features, hidden}, type: :f32)
      {w2, key} = Nx.Random.uniform(key, -1.0, 1.0, shape: {hidden, classes}, type: :f32)
      {x, _key} = Nx.Random.uniform(key, 0.0, 1.0, shape: {batch, features}, type: :f32)
      w1 = Nx.multiply(w1, :math.sqrt(6 / (features + hidden)))
      w2 = Nx.multiply(w2, :math.sqrt(6 / (hidden + classes)))
      b1 = Nx.broadcast(Nx.tensor(0.01, type: :f32), {hidden})
      b2 = Nx.broadcast(Nx.tensor(0.0, type: :f32), {classes})

      labels =
        Nx.equal(Nx.remainder(Nx.iota({batch, 1}), classes), Nx.iota({1, classes}))
        |> Nx.as_type(:f32)

      x = if features == 784, do: Nx.reshape(x, {batch, 1, 28, 28}), else: x
      params = {w1, b1, w2, b2}

      {transfer(params, backend), Nx.backend_transfer(x, backend),
       Nx.backend_transfer(labels, backend)}
    end)
  end

  defp transfer(tuple, backend),
    do: tuple |> Tuple.to_list() |> Enum.map(&Nx.backend_transfer(&1, backend)) |> List.to_tuple()
end
