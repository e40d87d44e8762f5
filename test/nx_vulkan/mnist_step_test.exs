Code.require_file("../../examples/mnist_mlp.exs", __DIR__)

defmodule Nx.Vulkan.MNISTStepTest do
  # Not async: changes the batch cap.
  use Nx.Vulkan.DeviceCase, async: false

  setup :keep_batch_max

  # Three SGD steps of the benchmark's model; returns the losses and final parameters as binaries.
  defp train(backend, shape) do
    {params, x, labels} = MNISTMLP.inputs(shape, backend)
    step = Nx.Defn.jit(&MNISTMLP.step/3)
    sgd = Nx.Defn.jit(&MNISTMLP.sgd/3)

    {losses, params} =
      Enum.map_reduce(1..3, params, fn _, params ->
        {loss, grads} = step.(params, x, labels)
        {Nx.to_number(loss), sgd.(params, grads, 0.1)}
      end)

    {losses, params |> Tuple.to_list() |> Enum.map(&Nx.to_binary/1)}
  end

  test "the training step is bit-identical across batch caps and matches the BinaryBackend" do
    shape = {32, 784, 128, 10}

    runs =
      for cap <- [0, 1, 4, 64, 256] do
        Nx.Vulkan.set_batch_max(cap)
        Nx.Vulkan.Fallback.tag_process({:mnist, cap})
        run = train(Nx.Vulkan.Backend, shape)

        assert Nx.Vulkan.Fallback.tagged({:mnist, cap}) == 0,
               "the step fell back to the host at cap #{cap}"

        run
      end

    assert length(Enum.uniq(runs)) == 1, "results differ across batch caps"

    {device_losses, _} = hd(runs)

    {host_losses, _} =
      Nx.with_default_backend(Nx.BinaryBackend, fn -> train(Nx.BinaryBackend, shape) end)

    for {d, h} <- Enum.zip(device_losses, host_losses) do
      assert abs(d - h) <= 1.0e-5 * abs(h), "loss #{d} vs BinaryBackend #{h}"
    end

    assert Enum.at(device_losses, 2) < Enum.at(device_losses, 0), "SGD did not reduce the loss"
  end

  test "inputs and gradients stay on the device" do
    {params, x, labels} = MNISTMLP.inputs({32, 784, 128, 10}, Nx.Vulkan.Backend)
    {loss, grads} = Nx.Defn.jit(&MNISTMLP.step/3).(params, x, labels)
    for t <- [loss | Tuple.to_list(grads)], do: assert(%Nx.Vulkan.Backend{} = t.data)
    assert is_float(Nx.to_number(loss))
  end
end
