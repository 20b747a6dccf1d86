"""The image check: build every Dockerfile target with buildah and run the images.

``make image-check`` (CI runs it after the tests) needs no Docker engine and no
registry: podman and buildah from apt, a stand-in for the Python base image made from
Debian (:mod:`.engine`), container storage under ``.cache/image-check``. It builds the
worker, bootstrap and Spark targets and smoke-tests them against the embedded local
stack on the host's loopback (:mod:`.smoke`), then prints the images' sizes and build
times. It removes the containers it started and stops the emulators; the images stay in
the work folder's storage for the next run (delete the folder to start over).
"""
