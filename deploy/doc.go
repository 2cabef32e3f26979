// Package deploy holds no code: its tests check the deployment files
// beside it (k8s/, systemd/) against kvnode's real flags, with the
// Kubernetes API types, so that a renamed flag or a wrong port fails
// make test rather than a rollout. A module of its own, so that the
// Kubernetes packages are dependencies of these checks only.
package deploy
