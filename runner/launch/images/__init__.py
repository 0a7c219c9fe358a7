"""The platforms' images and the container that runs the harness: images built, pulled and checked
(platform_images.py), their package locks (image_lock.py), recipes (image_sources.py) and archives
(image_archive.py), the Docker client, the host's devices, emulation, and the container starter with
its options (container.py, container_options.py)."""
