"""What a head needs besides the model's main input, for the tasks whose labels are not one class
or one token per position: span positions, choices folded into the batch, boxes, per-pixel
classes. `for_task` takes the inputs and labels `inputs.make_inputs` built and returns them
adapted to the entry's task; `to_device` moves such nested inputs."""
from torch_tpu.tools.model_zoo.configs import NUM_LABELS

CHOICES = 2


def for_task(task, inputs, labels, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed + 7)
    ids = inputs.get("input_ids")
    pixels = inputs.get("pixel_values")
    if task == "token_classification" and ids is not None:
        return inputs, torch.randint(0, NUM_LABELS, ids.shape, generator=g)
    if task == "question_answering" and ids is not None:
        batch, length = ids.shape[:2]
        inputs = dict(inputs, start_positions=torch.randint(0, length, (batch,), generator=g),
                      end_positions=torch.randint(0, length, (batch,), generator=g))
        return inputs, None
    if task == "multiple_choice" and ids is not None:
        # Every per-token input gains a choices dimension; the choices' token ids differ.
        batch = ids.shape[0]
        folded = {k: v.unsqueeze(1).expand(-1, CHOICES, *v.shape[1:]).contiguous()
                  for k, v in inputs.items() if v.dim() == 2 and v.shape == ids.shape}
        folded["input_ids"] = torch.randint(3, int(ids.max()) + 1, (batch, CHOICES, ids.shape[1]), generator=g)
        return dict(inputs, **folded), torch.randint(0, CHOICES, (batch,), generator=g)
    if task == "object_detection" and pixels is not None:
        # Two boxes per image, (centre x, centre y, width, height) inside the image.
        return inputs, [{"class_labels": torch.randint(0, NUM_LABELS, (2,), generator=g),
                         "boxes": torch.rand(2, 4, generator=g) * 0.4 + 0.2}
                        for _ in range(pixels.shape[0])]
    if task == "semantic_segmentation" and pixels is not None:
        return inputs, torch.randint(0, NUM_LABELS, (pixels.shape[0], *pixels.shape[-2:]), generator=g)
    if task in ("depth_estimation", "backbone", "base"):
        # No loss of their own (most depth heads raise on labels): the first output's mean square.
        return inputs, None
    return inputs, labels


def to_device(value, device):
    if hasattr(value, "to") and not isinstance(value, (dict, list, tuple)):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value
