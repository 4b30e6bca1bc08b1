"""What every grading room shares: the course's paths and source notebooks, the operator's settings, errors."""
