"""Storage for training jobs: existing buckets, file systems and disks as volumes, and the identities that use them."""
