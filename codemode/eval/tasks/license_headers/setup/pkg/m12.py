# SPDX-License-Identifier: MIT
import os

NAME_12 = 'm12'
