# GPU image: NVIDIA's PyTorch container ships CUDA, NCCL, a tuned PyTorch and apex (FusedLAMB,
# FusedLayerNorm), which the pipeline uses when `pretrain.use_apex: true`.
#   docker build -t bert-dvc .
#   docker run --gpus all --ipc=host --rm -it -v $PWD/data:/workspace/bert-dvc/data \
#       -v $PWD/metrics:/workspace/bert-dvc/metrics bert-dvc dvc repro
FROM nvcr.io/nvidia/pytorch:25.10-py3

WORKDIR /workspace/bert-dvc
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# The container's own torch (and apex) stay: install everything else from our pins, but not torch.
COPY requirements.txt requirements-test.txt ./
RUN grep -v '^torch==' requirements.txt > /tmp/requirements-notorch.txt \
 && pip install --no-cache-dir -r /tmp/requirements-notorch.txt

# The project itself, editable as `make` installs it: every process of the image imports `bert`
# whatever folder it starts in (`dask scheduler`, `dask worker tcp://HEAD:8786`, dask-mpi, torchrun's
# ranks), and a checkout mounted over /workspace/bert-dvc is the code they all import. Checked
# from another folder, where only the installed project can be found.
COPY . .
RUN pip install --no-cache-dir --no-deps -e . \
 && git config --global --add safe.directory /workspace/bert-dvc \
 && cd / && python -c "import apex, bert.model.network; print('apex available')"

CMD ["dvc", "repro"]
