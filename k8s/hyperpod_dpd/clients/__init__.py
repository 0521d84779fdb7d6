"""The live-system seams every command uses: AWS and Kubernetes clients, waits and the checks they report."""
